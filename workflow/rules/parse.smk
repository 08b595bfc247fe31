rule parse:
    input:
        report=app_input,
        code=pkg_code("parse.py", "derive.py", "what_if.py", "units.py", "ncu_csv.py", "ncu_rep.py", "config.py"),
    output:
        counters="data/counters/{app}.parquet",
        diagnostics="data/diagnostics/{app}.parse.parquet",
    params:
        kind=app_kind,
        source=app_source,
        device=app_device,
    log:
        "logs/parse/{app}.log",
    run:
        run_stage("parse", log[0], input=params.source, app=wildcards.app, kind=params.kind, device=params.device,
                  output=output.counters, diagnostics=output.diagnostics)
