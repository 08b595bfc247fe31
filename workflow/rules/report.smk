rule report:
    # only GPU work goes to a cluster's queue: this takes seconds of CPU, on the submitting host
    localrule: True
    input:
        kernels=all_kernel_tables(),
        ceilings=DEVICE_CEILINGS,
        diagnostics=diagnostics_tables(),
        code=pkg_code("report.py", "chart.py", "chart_roofs.py", "chart_instruction.py", "chart_trajectory.py",
                      "trajectory.py", "derive.py", "instruction.py", "ncu_rules.py", "inputs.py",
                      "assets/report.css", "assets/report.js",
                      *(f"pages/{p.name}" for p in sorted((PKG / "pages").glob("*.py")))),
    output:
        summary=report("reports/summary.html", category="Roofline", caption="../report/summary.rst"),
        apps=expand("reports/apps/{app}.html", app=sorted(APPS)),
        compare=expand("reports/compare/{name}.html", name=sorted(CONFIG.series)),
        vega="reports/assets/vega-bundle.js",
    params:
        title=CONFIG.report.title,
        apps=sorted(APPS),
        sources=app_sources(),
        inputs=input_problems(),
        series=as_json({name: series.model_dump() for name, series in CONFIG.series.items()}),
    log:
        "logs/report/summary.log",
    conda:
        ENV
    shell:
        stage("report") + " --kernels {input.kernels} --ceilings={input.ceilings} --diagnostics {input.diagnostics}"
        " --output={output.summary} --apps-dir=reports/apps --title={params.title:q} --apps {params.apps}"
        " --sources={params.sources:q} --input-problems={params.inputs:q}"
        " --series={params.series:q} --compare-dir=reports/compare --tonight-script=reports/tonight.js"
