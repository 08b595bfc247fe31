rule classify:
    input:
        counters="data/counters/{app}.parquet",
        ceilings="data/ceilings/{app}.parquet",
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
    conda:
        "../envs/roofline.yaml"
    shell:
        "python -m roofline.classify --counters {input.counters} --ceilings {input.ceilings}"
        " --low-roof-fraction {params.low} --above-roof-tolerance {params.tolerance}"
        " --annotations {params.annotations:q}"
        " --output {output.classified} --kernels {output.kernels} 2> {log}"
