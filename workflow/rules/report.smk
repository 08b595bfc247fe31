# The summary, the series' compare pages, and the Vega bundle and device charts every page loads, from every app's
# tables; each app's own page is a job of its own (app_page), so one changed app rewrites its page only.
rule report:
    # only GPU work goes to a cluster's queue: this takes seconds of CPU, on the submitting host
    localrule: True
    input:
        kernels=all_kernel_tables(),
        ceilings=DEVICE_CEILINGS,
        diagnostics=diagnostics_tables(),
        # the pages the summary links to: asking for the summary (`make report`) builds them too
        pages=expand("reports/apps/{app}.html", app=sorted(APPS)),
    output:
        summary=report("reports/summary.html", category="Roofline", caption="../report/summary.rst"),
        compare=expand("reports/compare/{name}.html", name=sorted(CONFIG.series)),
        vega="reports/assets/vega-bundle.js",
    params:
        code=pkg_code("report.py", "chart.py", "chart_roofs.py", "chart_instruction.py", "chart_trajectory.py",
                      "trajectory.py", "derive.py", "instruction.py", "ncu_rules.py", "inputs.py",
                      "assets/report.css", "assets/report.js",
                      *(f"pages/{p.name}" for p in sorted((PKG / "pages").glob("*.py")))),
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
        " --output={output.summary} --title={params.title:q} --apps {params.apps}"
        " --sources={params.sources:q} --input-problems={params.inputs:q}"
        " --series={params.series:q} --compare-dir=reports/compare --tonight-script=reports/tonight.js"


rule app_page:
    localrule: True
    input:
        kernels="data/kernels/{app}.parquet",
        ceilings=checked_ceilings,
        diagnostics="data/diagnostics/{app}.parse.parquet",
    output:
        page="reports/apps/{app}.html",
    params:
        code=pkg_code("report.py", "chart.py", "chart_roofs.py", "chart_instruction.py", "chart_trajectory.py",
                      "trajectory.py", "derive.py", "instruction.py", "ncu_rules.py", "inputs.py",
                      "assets/report.css", "assets/report.js",
                      *(f"pages/{p.name}" for p in sorted((PKG / "pages").glob("*.py")))),
        title=CONFIG.report.title,
        source=lambda wildcards: APPS[wildcards.app].source or "",
        summary="reports/summary.html",
    log:
        "logs/report/{app}.log",
    conda:
        ENV
    shell:
        stage("page") + " --app={wildcards.app} --kernels={input.kernels} --ceilings={input.ceilings}"
        " --diagnostics {input.diagnostics} --output={output.page} --title={params.title:q}"
        " --source={params.source:q} --summary={params.summary:q}"
