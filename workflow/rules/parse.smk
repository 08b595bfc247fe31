rule parse:
    input:
        report=app_input,
        code=pkg_code("parse.py", "derive.py", "what_if.py", "units.py", "ncu_rep.py", "config.py", "inputs.py",
                      *(f"ncu_csv/{p.name}" for p in sorted((PKG / "ncu_csv").glob("*.py")))),
    output:
        counters="data/counters/{app}.parquet",
        diagnostics="data/diagnostics/{app}.parse.parquet",
    params:
        kind=app_kind,
        source=app_source,
        device=app_device,
        problem=app_problem,
    log:
        "logs/parse/{app}.log",
    run:
        parse_app(wildcards.app, log[0], params, output)
