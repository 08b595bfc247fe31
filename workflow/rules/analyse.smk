# Analyse: every app's counters -> one ceilings table per device (every app on a device is judged
# against the same roof) -> each app's classified launches and kernels, in a job per app.
# `ceilings` is a checkpoint: once it has run, Snakemake looks again at which classify jobs need to
# run, so a ceilings table written byte-identical (one app's counters changed, no roof moved) reruns
# only that app's chain, and a moved roof reruns every app (the profiles checksum inputs).
checkpoint ceilings:
    # only GPU work goes to a cluster's queue: this takes seconds of CPU, on the submitting host
    localrule: True
    input:
        counters=expand("data/counters/{app}.parquet", app=sorted(APPS)),
        catalog=catalog_file(),
        measured=measured_table(),
    output:
        ceilings=DEVICE_CEILINGS,
        diagnostics="data/diagnostics/devices.ceilings.parquet",
    params:
        code=pkg_code("analysis.py", "ceilings.py", "catalog.py", "catalog_entries.py", "ncu_rules.py"),
        options=ceilings_options(),
        measured=lambda wildcards, input: one_path(input.measured),
    log:
        "logs/analyse/ceilings.log",
    conda:
        ENV
    shell:
        stage("ceilings") + " --counters {input.counters} --catalog={input.catalog:q}"
        " --measured={params.measured:q} --policy={params.options[policy]:q}"
        " --device-policy={params.options[device_policy]:q} --overrides={params.options[overrides]:q}"
        " --margin={params.options[margin]} --ceilings={output.ceilings} --ceilings-diagnostics={output.diagnostics}"


rule classify:
    localrule: True
    input:
        counters="data/counters/{app}.parquet",
        ceilings=checked_ceilings,
    output:
        classified="data/classified/{app}.parquet",
        kernels="data/kernels/{app}.parquet",
    params:
        code=pkg_code("analysis.py", "classify.py", "instruction.py", "ncu_rules.py"),
        low=CONFIG.classify.low_roof_fraction,
        tolerance=CONFIG.classify.above_roof_tolerance,
        annotations=as_json([a.model_dump() for a in CONFIG.classify.annotations]),
    log:
        "logs/analyse/{app}.log",
    conda:
        ENV
    shell:
        stage("classify") + " --counters={input.counters} --ceilings={input.ceilings}"
        " --low-roof-fraction={params.low} --above-roof-tolerance={params.tolerance}"
        " --annotations={params.annotations:q} --classified={output.classified} --kernels={output.kernels}"
