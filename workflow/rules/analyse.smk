# Analyse: every app's counters -> one ceilings table per device (every app on a device is judged
# against the same roof) -> each app's classified launches and kernels, in a job per app.
# `ceilings` is a checkpoint: once it has run, Snakemake looks again at which classify jobs need to
# run, so a ceilings table written byte-identical (one app's counters changed, no roof moved) reruns
# only that app's chain, and a moved roof reruns every app (the profiles checksum inputs).
checkpoint ceilings:
    # only GPU work goes to a cluster's queue: this takes seconds of CPU, on the submitting host
    localrule: True
    input:
        counters=expand("data/counters/{app}.parquet", app=sorted(APPS)),
        catalog=catalog_file(),
        measured=measured_table(),
    output:
        ceilings=DEVICE_CEILINGS,
        diagnostics="data/diagnostics/devices.ceilings.parquet",
    params:
        code=pkg_code("ceilings"),
        kept_joins=KEPT_JOINS,
        options=ceilings_options(),
        measured=lambda wildcards, input: one_path(input.measured),
    log:
        "logs/analyse/ceilings.log",
    conda:
        ENV
    shell:
        stage("ceilings") + " --counters {input.counters} --catalog={input.catalog:q}"
        " --measured={params.measured:q} --policy={params.options[policy]:q}"
        " --device-policy={params.options[device_policy]:q} --overrides={params.options[overrides]:q}"
        " --margin={params.options[margin]} --ceilings={output.ceilings} --ceilings-diagnostics={output.diagnostics}"
        " --keep-joined={params.kept_joins}"


# One job per app: classified against the ceilings, its kernels aggregated, its page written (the
# page draws the summary's device charts, reports/assets/charts.js, so it builds none of its own).
rule analyse_app:
    localrule: True
    input:
        counters="data/counters/{app}.parquet",
        ceilings=checked_ceilings,
        diagnostics="data/diagnostics/{app}.parse.parquet",
    output:
        classified="data/classified/{app}.parquet",
        kernels="data/kernels/{app}.parquet",
        page="reports/apps/{app}.html",
    params:
        code=pkg_code("app"),
        low=CONFIG.classify.low_roof_fraction,
        tolerance=CONFIG.classify.above_roof_tolerance,
        annotations=as_json([a.model_dump() for a in CONFIG.classify.annotations]),
        title=CONFIG.report.title,
        source=lambda wildcards: APPS[wildcards.app].source or "",
        summary="reports/summary.html",
    log:
        "logs/analyse/{app}.log",
    conda:
        ENV
    shell:
        stage("app") + " --app={wildcards.app} --counters={input.counters} --ceilings={input.ceilings}"
        " --low-roof-fraction={params.low} --above-roof-tolerance={params.tolerance}"
        " --annotations={params.annotations:q} --classified={output.classified} --kernels={output.kernels}"
        " --diagnostics {input.diagnostics} --page={output.page} --title={params.title:q}"
        " --source={params.source:q} --summary={params.summary:q}"
