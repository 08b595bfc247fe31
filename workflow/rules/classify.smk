rule classify:
    input:
        counters="data/counters/{app}.parquet",
        ceilings=DEVICE_CEILINGS,
        code=pkg_code("classify.py"),
    output:
        classified="data/classified/{app}.parquet",
        kernels="data/kernels/{app}.parquet",
    params:
        low=CONFIG.classify.low_roof_fraction,
        tolerance=CONFIG.classify.above_roof_tolerance,
        annotations=as_json([a.model_dump() for a in CONFIG.classify.annotations]),
    log:
        "logs/classify/{app}.log",
    run:
        run_stage("classify", log[0], counters=input.counters, ceilings=input.ceilings,
                  low_roof_fraction=params.low, above_roof_tolerance=params.tolerance,
                  annotations=params.annotations, output=output.classified, kernels=output.kernels)
