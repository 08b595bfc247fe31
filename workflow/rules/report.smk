# The summary, the series' compare pages, and the Vega bundle and device charts every page loads,
# from every app's tables; each app's own page is written by its classify_app job, so one changed app
# rewrites its page only.
rule report:
    # only GPU work goes to a cluster's queue: this takes seconds of CPU, on the submitting host
    localrule: True
    input:
        kernels=all_kernel_tables(),
        ceilings=DEVICE_CEILINGS,
        diagnostics=diagnostics_tables(),
        # the pages the summary links to: asking for the summary (`make report`) builds them too
        pages=expand("reports/apps/{app}.html", app=sorted(APPS)),
    output:
        summary=report("reports/summary.html", category="Roofline", caption="../report/summary.rst"),
        compare=expand("reports/compare/{name}.html", name=sorted(CONFIG.series)),
        vega="reports/assets/vega-bundle.js",
        # the device charts every app page draws (fitted to its rows), so that an app's job draws none
        charts="reports/assets/charts.js",
    params:
        code=pkg_code("report"),
        kept_joins=KEPT_JOINS,
        title=CONFIG.report.title,
        top_kernels=CONFIG.report.top_kernels,
        apps=sorted(APPS),
        sources=app_sources(),
        inputs=input_problems(),
        series=as_json({name: series.model_dump() for name, series in CONFIG.series.items()}),
    log:
        "logs/report/summary.log",
    conda:
        ENV
    shell:
        stage("report") + " --kernels {input.kernels} --ceilings={input.ceilings} --diagnostics {input.diagnostics}"
        " --output={output.summary} --title={params.title:q} --top-kernels={params.top_kernels} --apps {params.apps}"
        " --sources={params.sources:q} --input-problems={params.inputs:q}"
        " --series={params.series:q} --compare-dir=reports/compare --tonight-script=reports/tonight.js"
        " --keep-joined={params.kept_joins}"

