rule parse:
    input:
        report=app_input,
        code=pkg_code("parse.py", "units.py", "ncu_csv.py", "config.py"),
    output:
        counters="data/counters/{app}.parquet",
        diagnostics="data/diagnostics/{app}.parse.parquet",
    params:
        kind=app_kind,
        source=app_source,
        device=app_device,
    log:
        "logs/parse/{app}.log",
    conda:
        "../envs/roofline.yaml"
    shell:
        "python -m roofline.parse --input {params.source:q} --app {wildcards.app} --kind {params.kind}"
        " --device={params.device:q}"
        " --output {output.counters} --diagnostics {output.diagnostics} 2> {log}"
