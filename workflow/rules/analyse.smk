# Analyse: every app's counters -> one ceilings table per device (every app on a device is judged
# against the same roof) -> every app's classified launches and kernels, in one job: a change to one
# app can move its device's roof, so the other apps' verdicts rerun with it in any case.
rule analyse:
    # only GPU work goes to a cluster's queue: this takes seconds of CPU, on the submitting host
    localrule: True
    input:
        counters=expand("data/counters/{app}.parquet", app=sorted(APPS)),
        catalog=catalog_file(),
        measured=measured_table(),
        code=pkg_code("analysis.py", "ceilings.py", "catalog.py", "catalog_entries.py", "classify.py", "instruction.py", "ncu_rules.py"),
    output:
        ceilings=DEVICE_CEILINGS,
        diagnostics="data/diagnostics/devices.ceilings.parquet",
        classified=expand("data/classified/{app}.parquet", app=sorted(APPS)),
        kernels=all_kernel_tables(),
    params:
        options=ceilings_options(),
        measured=lambda wildcards, input: one_path(input.measured),
        low=CONFIG.classify.low_roof_fraction,
        tolerance=CONFIG.classify.above_roof_tolerance,
        annotations=as_json([a.model_dump() for a in CONFIG.classify.annotations]),
    # as many as Snakemake gives it: it lowers a rule's threads to --cores (or --local-cores)
    threads: 64
    log:
        "logs/analyse/analyse.log",
    conda:
        ENV
    shell:
        stage("analysis") + " --counters {input.counters} --catalog={input.catalog:q}"
        " --measured={params.measured:q} --policy={params.options[policy]:q}"
        " --device-policy={params.options[device_policy]:q} --overrides={params.options[overrides]:q}"
        " --margin={params.options[margin]} --low-roof-fraction={params.low}"
        " --above-roof-tolerance={params.tolerance} --annotations={params.annotations:q}"
        " --ceilings={output.ceilings} --ceilings-diagnostics={output.diagnostics}"
        " --classified {output.classified} --kernels {output.kernels} --jobs={threads}"
