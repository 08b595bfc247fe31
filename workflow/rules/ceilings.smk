rule ceilings:
    input:
        counters="data/counters/{app}.parquet",
        catalog=repo_file(CONFIG.ceilings.catalog),
        measured=measured_table(),
        code=pkg_code("ceilings.py", "catalog.py"),
    output:
        ceilings="data/ceilings/{app}.parquet",
        diagnostics="data/diagnostics/{app}.ceilings.parquet",
    params:
        policy=",".join(CONFIG.ceilings.policy),
        device_policy=as_json(CONFIG.ceilings.device_policy),
        overrides=as_json(CONFIG.ceilings.gpus),
        margin=CONFIG.ceilings.cross_check_margin,
    log:
        "logs/ceilings/{app}.log",
    run:
        run_stage("ceilings", log[0], counters=input.counters, catalog=input.catalog, policy=params.policy,
                  device_policy=params.device_policy, overrides=params.overrides, measured=one_path(input.measured),
                  margin=params.margin, output=output.ceilings, diagnostics=output.diagnostics)
