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
        options=ceilings_options(),
    log:
        "logs/ceilings/devices.log",
    run:
        run_stage("ceilings", log[0], counters=input.counters, catalog=input.catalog, measured=one_path(input.measured),
                  output=output.ceilings, diagnostics=output.diagnostics, **params.options)
