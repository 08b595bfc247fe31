# roofline: Nsight Compute profiles -> hierarchical roofline analysis.
# Table of contents only; the rules are glue in workflow/rules/, the logic lives in roofline/.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/capture.smk"
include: "workflow/rules/parse.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/ceilings.smk"
include: "workflow/rules/classify_app.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/track.smk"
include: "workflow/rules/status.smk"


rule all:
    default_target: True
    localrule: True
    input:
        final_outputs(),


# The nightly target (docs/tracking.md): `snakemake --cores 4 nightly --config run_id=$(date +%F)`,
# then the gate of README.md, which reads status.json and regressions.json.
rule nightly:
    localrule: True
    input:
        nightly_outputs(),
