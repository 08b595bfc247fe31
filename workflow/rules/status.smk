# Status: every diagnostics table -> reports/status.json, the run's verdict for a scheduler
# (`python -m roofline.status --check reports/status.json` exits 1 when any input failed, 4 when an
# inputs: entry gave no app).
rule status:
    # only GPU work goes to a cluster's queue: this takes seconds of CPU, on the submitting host
    localrule: True
    input:
        diagnostics=diagnostics_tables(),
    output:
        status="reports/status.json",
    params:
        code=pkg_code("status"),
        sources=app_sources(),
        inputs=input_problems(),
    log:
        "logs/status/status.log",
    conda:
        ENV
    shell:
        stage("status") + " --diagnostics {input.diagnostics} --output={output.status}"
        " --sources={params.sources:q} --input-problems={params.inputs:q}"
