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
    conda:
        "../envs/roofline.yaml"
    shell:
        "python -m roofline.ceilings --counters {input.counters} --catalog {input.catalog:q}"
        " --policy {params.policy} --device-policy {params.device_policy:q}"
        " --overrides {params.overrides:q} --measured={input.measured:q} --margin {params.margin}"
        " --output {output.ceilings} --diagnostics {output.diagnostics} 2> {log}"
