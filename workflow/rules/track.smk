# Nightly tracking (roofline/nightly/track.py, docs/tracking.md): append tonight's kernels of every app to
# the history store data/history/ (one partition per run id, replaced on a rerun), judge every
# kernel series and write the findings; trends_page then draws the trends page. run_id() is a param,
# so a new night reruns the rule even when the kernels tables did not change.
HISTORY_STORE = "data/history"
TRENDS_PAGE = "reports/trends.html"  # trends_page writes it; tonight's block links to it


rule track_history:
    # only GPU work goes to a cluster's queue: this takes seconds of CPU, on the submitting host
    localrule: True
    input:
        kernels=all_kernel_tables(),
        counters=expand("data/counters/{app}.parquet", app=sorted(APPS)),
        # beside the report up to a few hundred apps, after it beyond (common.smk: memory)
        after=report_before_tracking(),
    output:
        regressions="reports/regressions.json",
        # the summary's "tonight against the baseline" block, loaded by the summary when opened, so
        # that the report does not wait for this job (roofline/pages/tonight.py)
        tonight="reports/tonight.js",
    params:
        code=pkg_code("track_history"),
        kept_joins=KEPT_JOINS,
        run_id=run_id(),
        store=HISTORY_STORE,
        trends=TRENDS_PAGE,
        # the config's hash, not the config: a thousand apps' is too long for one argument. The model's
        # values, defaults included: two configs that differ only by a default written out are one
        config_hash=config_hash(as_json(CONFIG.model_dump(mode="json"))),
        decision_params=as_json(CONFIG.tracking.params),
        context=as_json(CONFIG.tracking.context),
    log:
        "logs/track/track_history.log",
    conda:
        ENV
    shell:
        stage("track_history") + " --kernels {input.kernels} --counters {input.counters} --store={params.store}"
        " --run-id={params.run_id:q} --config-hash={params.config_hash} --params={params.decision_params:q}"
        " --context-json={params.context:q} --trends={params.trends} --no-trends-page"
        " --regressions={output.regressions} --tonight-script={output.tonight} --keep-joined={params.kept_joins}"


# The trends page of the night track_history judged: its own job, so that the judging runs beside
# the report and only the drawing waits for the summary's device charts.
rule trends_page:
    localrule: True
    input:
        regressions="reports/regressions.json",
        # the summary's device charts, which the page draws tonight's kernels on (so asking for the
        # trends page, as a nightly job does, builds the summary it links to as well)
        charts="reports/assets/charts.js",
    output:
        trends=TRENDS_PAGE,
    params:
        code=pkg_code("trends_page"),
        store=HISTORY_STORE,
    log:
        "logs/track/trends_page.log",
    conda:
        ENV
    shell:
        stage("trends_page") + " --store={params.store} --regressions={input.regressions} --trends={output.trends}"
        " --charts-asset={input.charts}"
