# Parse: one app's input (a report, an export, a folder of exports, a what-if table, or what capture
# wrote) -> its per-launch counters and diagnostics. An input the config check found unreadable
# gets its error recorded instead (--problem), so the app shows as failed with the fix.
rule parse:
    # only GPU work goes to a cluster's queue: this takes seconds of CPU, on the submitting host
    localrule: True
    input:
        report=app_input,
    output:
        counters="data/counters/{app}.parquet",
        diagnostics="data/diagnostics/{app}.parse.parquet",
    params:
        code=pkg_code("parse"),
        kind=app_kind,
        source=app_source,
        device=app_device,
        problem=app_problem,
    log:
        "logs/parse/{app}.log",
    conda:
        ENV
    shell:
        stage("parse") + " --input={params.source:q} --app={wildcards.app} --kind={params.kind}"
        " --device={params.device:q} --problem={params.problem:q}"
        " --output={output.counters} --diagnostics={output.diagnostics}"
