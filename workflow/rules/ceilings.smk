# Ceilings: every app's counters -> one ceilings table per device (every app on a device is judged
# against the same roof; roofline/stages/ceilings.py), and each app's share of it (its devices' rows),
# rewritten only when it changes. `ceilings` is a checkpoint: once it has run, Snakemake looks again
# at which classify jobs need to run; each reads its app's share, so a moved roof reruns the apps
# of that device only (workflow/rules/common.smk, checked_ceilings).
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
        code=pkg_code("ceilings"),
        kept_joins=KEPT_JOINS,
        options=ceilings_options(),
        measured=lambda wildcards, input: one_path(input.measured),
        app_ceilings=APP_CEILINGS_FOLDER,
    log:
        "logs/ceilings/ceilings.log",
    conda:
        ENV
    shell:
        stage("ceilings") + " --counters {input.counters} --catalog={input.catalog:q}"
        " --measured={params.measured:q} --policy={params.options[policy]:q}"
        " --device-policy={params.options[device_policy]:q} --overrides={params.options[overrides]:q}"
        " --margin={params.options[margin]} --ceilings={output.ceilings} --ceilings-diagnostics={output.diagnostics}"
        " --keep-joined={params.kept_joins} --app-ceilings={params.app_ceilings:q}"
