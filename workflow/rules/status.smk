# Status: every diagnostics table -> reports/status.json, the run's verdict for a scheduler
# (`python -m roofline.status --check reports/status.json` exits 1 when any input failed).
rule status:
    input:
        diagnostics=diagnostics_tables(),
        code=pkg_code("status.py"),
    output:
        status="reports/status.json",
    log:
        "logs/status/status.log",
    run:
        run_stage("status", log[0], diagnostics=input.diagnostics, output=output.status)
