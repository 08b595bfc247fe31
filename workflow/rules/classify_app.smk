# classify_app (roofline/stages/classify_app.py): one job per app, classified against the ceilings, its kernels aggregated, its page written (the
# page draws the summary's device charts, reports/assets/charts.js, so it builds none of its own).
rule classify_app:
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
        code=pkg_code("classify_app"),
        low=CONFIG.classify.low_roof_fraction,
        tolerance=CONFIG.classify.above_roof_tolerance,
        annotations=as_json([a.model_dump() for a in CONFIG.classify.annotations]),
        title=CONFIG.report.title,
        source=lambda wildcards: APPS[wildcards.app].source or "",
        summary="reports/summary.html",
    log:
        "logs/classify_app/{app}.log",
    conda:
        ENV
    shell:
        stage("classify_app") + " --app={wildcards.app} --counters={input.counters} --ceilings={input.ceilings}"
        " --low-roof-fraction={params.low} --above-roof-tolerance={params.tolerance}"
        " --annotations={params.annotations:q} --classified={output.classified} --kernels={output.kernels}"
        " --diagnostics {input.diagnostics} --page={output.page} --title={params.title:q}"
        " --source={params.source:q} --summary={params.summary:q}"
