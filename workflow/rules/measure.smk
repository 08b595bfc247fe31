# Measured ceilings: microbenchmarks on a GPU node, only when config ceilings.measure is true.
rule measure:
    input:
        code=pkg_code("measure.py"),
    output:
        MEASURED_TABLE,
    params:
        run=run_id(),
    resources:
        gpu=1,
        runtime=20,
    log:
        "logs/measure/measured.log",
    conda:
        "../envs/roofline.yaml"
    shell:
        "python -m roofline.measure --output {output} 2> {log}"
