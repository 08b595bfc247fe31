# One ceilings table for every device of the run: every app on a device is judged against the same
# roof (the report source is the median over all apps' launches on that device).
rule ceilings:
    input:
        counters=expand("data/counters/{app}.parquet", app=sorted(APPS)),
        catalog=repo_file(CONFIG.ceilings.catalog),
        measured=measured_table(),
        code=pkg_code("ceilings.py", "catalog.py"),
    output:
        ceilings=DEVICE_CEILINGS,
        diagnostics="data/diagnostics/devices.ceilings.parquet",
    params:
        policy=",".join(CONFIG.ceilings.policy),
        device_policy=as_json(CONFIG.ceilings.device_policy),
        overrides=as_json(CONFIG.ceilings.gpus),
        margin=CONFIG.ceilings.cross_check_margin,
    log:
        "logs/ceilings/devices.log",
    run:
        run_stage("ceilings", log[0], counters=list(input.counters), catalog=input.catalog, policy=params.policy,
                  device_policy=params.device_policy, overrides=params.overrides, measured=one_path(input.measured),
                  margin=params.margin, output=output.ceilings, diagnostics=output.diagnostics)
