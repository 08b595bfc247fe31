# Measured ceilings: microbenchmarks on a GPU node, only when config ceilings.measure is true.
rule measure:
    input:
        code=[str(PKG / "capture" / "measure.py")],
    output:
        MEASURED_TABLE,
    params:
        run=capture_run_id(),
    resources:
        gpu=1,
        runtime=20,
    log:
        "logs/measure/measured.log",
    conda:
        ENV
    shell:
        python_m("roofline.capture.measure") + " --output {output} 2> {log}"
