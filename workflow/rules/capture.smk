# Capture: runs apps with a `command:` under ncu (the only rule that needs a GPU); apps given as
# reports never schedule it. It reruns only for GPU reasons: the app's capture settings, capture.ncu,
# the metrics it asks ncu for, the capture code itself, or the run id a nightly passes
# (`--config run_id=...`); job resources (gpu_model, runtime, mem_mb) place the job only.
from roofline.capture.capture import app_regex, capture_plan  # noqa: E402
from roofline.metrics.plan import plan_fingerprint  # noqa: E402

CAPTURES = capture_plan(CONFIG, {name: app.kind for name, app in APPS.items()})


rule capture:
    input:
        code=[str(PKG / "capture" / m) for m in ("capture.py", "probe.py", "ncu_run.py")],
    output:
        report=f"{CONFIG.capture.raw_dir}/{{app}}.ncu-rep",
        sidecar=f"{CONFIG.capture.raw_dir}/{{app}}.capture.json",
    wildcard_constraints:
        app=app_regex(CAPTURES),
    params:
        settings=lookup(dpath="{app}/settings", within=CAPTURES),
        ncu=CONFIG.capture.ncu,
        metrics=plan_fingerprint(),
        run_id=capture_run_id(),
    resources:
        gpu=1,
        gpu_model=lookup(dpath="{app}/gpu_model", within=CAPTURES),
        runtime=lookup(dpath="{app}/runtime", within=CAPTURES),
        mem_mb=lookup(dpath="{app}/mem_mb", within=CAPTURES),
    log:
        "logs/capture/{app}.log",
    conda:
        ENV
    shell:
        python_m("roofline.capture.capture") + " --app {wildcards.app} --config-json {params.settings:q}"
        " --ncu {params.ncu:q} --run-id={params.run_id:q}"
        " --output {output.report} --sidecar {output.sidecar} --record-failure 2> {log}"

