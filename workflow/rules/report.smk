rule report:
    input:
        kernels=all_kernel_tables(),
        ceilings=expand("data/ceilings/{app}.parquet", app=sorted(APPS)),
        diagnostics=expand(
            "data/diagnostics/{app}.{stage}.parquet",
            app=sorted(APPS),
            stage=["parse", "ceilings"],
        ),
        code=pkg_code("report.py"),
    output:
        summary="reports/summary.html",
        apps=expand("reports/apps/{app}.html", app=sorted(APPS)),
    params:
        title=CONFIG.report.title,
    log:
        "logs/report/summary.log",
    conda:
        "../envs/roofline.yaml"
    shell:
        "{PYTHON} -m roofline.report --kernels {input.kernels} --ceilings {input.ceilings}"
        " --diagnostics {input.diagnostics} --output {output.summary} --apps-dir reports/apps"
        " --title {params.title:q} 2> {log}"
