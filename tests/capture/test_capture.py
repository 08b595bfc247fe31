"""Capture: the ncu command per GPU generation and per app option, failure messages with their fix
(fake ``ncu`` scripts in tmp_path), a fake-ncu run of the whole workflow, and a real capture where
a GPU is present."""

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REAL, REPO, snakemake_command

from roofline.capture import capture as cap
from roofline.capture import probe
from roofline.capture.capture import app_regex, capture_plan, ncu_command
from roofline.capture.probe import NCU_MISSING, parse_gpu_list, parse_query_metrics
from roofline.config.model import AppConfig, load_config
from roofline.config.workflow import resolve_apps
from roofline.errors import CaptureError
from roofline.metrics.plan import compute_capability, plan_metrics
from roofline.metrics.recipe import Quantity, Recipe

RMSNORM = REAL / "h100pcie-rmsnorm-full-ncu2025.1" / "2025-04-21_v1.ncu-rep"
VOLTA_TENSOR = "sm__inst_executed_pipe_tensor.sum"


def _metrics(argv: list[str]) -> list[str]:
    return argv[argv.index("--metrics") + 1].split(",")


def _app(**settings) -> AppConfig:
    return AppConfig(command=settings.pop("command", "./saxpy --n 1024"), **settings)


# -- the command -----------------------------------------------------------------------------------


def test_without_architecture_the_metrics_are_the_recipe_tables_capture_list():
    argv = ncu_command(_app(), "saxpy")
    assert tuple(_metrics(argv)) == plan_metrics().metrics
    assert argv[0] == "ncu"
    assert argv[-6:] == ["--export", "data/raw/saxpy.ncu-rep", "--force-overwrite", "./saxpy", "--n", "1024"]


def test_metric_sets_differ_by_generation_where_recipes_have_cc_limits():
    volta, ampere, hopper = (
        _metrics(ncu_command(_app(), "a", architecture=arch)) for arch in ("sm_70", "sm_80", "sm_90")
    )
    # The Volta tensor recipe (cc 70-72) is preferred on sm_70 and invalid elsewhere.
    assert VOLTA_TENSOR in volta
    assert VOLTA_TENSOR not in ampere and VOLTA_TENSOR not in hopper
    assert "sm__ops_path_tensor_src_fp16.sum" not in volta
    # Hopper: the wgmma/mma.sync splits, not the aggregate that holds dense and sparse work together
    assert "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum" in hopper
    assert "sm__ops_path_tensor_src_fp16.sum" not in hopper
    # Quantities without cc limits ask for the same metrics on every generation.
    for common in ("gpu__time_duration.sum", "dram__bytes.sum", "lts__t_bytes.sum"):
        assert common in volta and common in ampere and common in hopper
    assert plan_metrics("sm_70").recipes["flop_tensor_fp16"] == "volta_pipe_tensor_x512"
    assert plan_metrics("sm_90").recipes["flop_tensor_fp16"] == "hopper_gmma_count"
    assert plan_metrics("sm_80").recipes["flop_tensor_fp16"] == "ampere_count"
    assert plan_metrics("sm_90").recipes["peak_flops_tensor_fp16"] == "hopper_gmma_peak_x_sm_clock"
    assert "sm__ops_path_tensor_src_fp16_dst_fp32_sparsity_off.sum" in ampere
    assert "sm__ops_path_tensor_src_fp16.sum" not in ampere


def test_recipe_choice_follows_cc_limits_of_any_table():
    quantities = (
        Quantity(
            "work",
            "FLOP",
            (
                Recipe("hopper", ((1.0, "h__ops.sum"),), cc_min=90),
                Recipe("ampere", ((1.0, "a__ops.sum"),), cc_min=80, cc_max=89),
                Recipe("volta", ((1.0, "v__ops.sum"),), cc_min=70, cc_max=72),
                Recipe("generic", ((1.0, "g__ops.sum"),)),
            ),
        ),
        Quantity("not_captured", "B", (Recipe("x", ((1.0, "x__bytes.sum"),)),), capture=False),
    )
    chosen = {arch: plan_metrics(arch, quantities=quantities, identity=()) for arch in ("sm_70", "sm_80", "sm_90")}
    assert chosen["sm_70"].metrics == ("v__ops.sum",)
    assert chosen["sm_80"].metrics == ("a__ops.sum",)
    assert chosen["sm_90"].metrics == ("h__ops.sum",)
    assert plan_metrics("sm_75", quantities=quantities, identity=()).metrics == ("g__ops.sum",)
    assert plan_metrics(None, quantities=quantities, identity=()).metrics == ("g__ops.sum",)
    assert chosen["sm_90"].source == "compute-capability"


def test_available_metrics_pick_the_first_recipe_the_gpu_offers_and_record_it():
    base = {m.split(".")[0] for m in plan_metrics().metrics}
    base -= {"dram__bytes", "gpu__time_duration"}
    base |= {"dram__bytes_read", "dram__bytes_write", "sm__cycles_elapsed"}
    plan = plan_metrics("sm_90", base)
    assert plan.source == "query-metrics"
    assert plan.recipes["dram_bytes"] == "dram_read_plus_write"
    assert plan.recipes["duration_s"] == "sm_cycles_over_clock"
    assert "dram__bytes.sum" not in plan.metrics and "dram__bytes_read.sum" in plan.metrics
    # device and launch attributes are always offered although --query-metrics omits them
    assert "device__attribute_display_name" in plan.metrics
    argv = ncu_command(_app(), "a", architecture="sm_90", available_metrics=base)
    assert _metrics(argv) == list(plan.metrics)


def test_a_quantity_without_any_available_recipe_is_recorded_missing():
    plan = plan_metrics("sm_90", {"gpu__time_duration"})
    assert "dram_bytes" in plan.missing and "dram_bytes" not in plan.recipes
    assert plan.recipes["duration_s"] == "gpu_time_duration"


def test_every_app_option_becomes_its_ncu_flag():
    app = _app(
        command="python train.py --steps 3 'two words'",
        kernel_filter="regex:gemm",
        kernel_name_base="demangled",
        nvtx_include=["step/", "fwd/"],
        nvtx_exclude=["warmup/"],
        launch_skip=10,
        launch_count=5,
        replay_mode="application",
        clock_control="none",
        cache_control="all",
        extra_ncu_flags=["--target-processes", "all"],
    )
    argv = ncu_command(app, "train", ncu="/opt/ncu", output="out/train.ncu-rep")
    line = shlex.join(argv)
    assert argv[0] == "/opt/ncu"
    for flags in (
        "--kernel-name regex:gemm",
        "--kernel-name-base demangled",
        "--nvtx --nvtx-include step/ --nvtx-include fwd/ --nvtx-exclude warmup/",
        "--launch-skip 10 --launch-count 5",
        "--replay-mode application",
        "--clock-control none",
        "--cache-control all",
        "--target-processes all",
        "--export out/train.ncu-rep --force-overwrite python train.py --steps 3 'two words'",
    ):
        assert flags in line
    assert argv[-5:] == ["python", "train.py", "--steps", "3", "two words"]


def test_no_option_flags_when_the_app_sets_none():
    argv = ncu_command(_app(), "a")
    for flag in (
        "--kernel-name",
        "--nvtx",
        "--launch-skip",
        "--launch-count",
        "--replay-mode",
        "--clock-control",
        "--cache-control",
    ):
        assert flag not in argv


def test_bad_command_and_architecture_are_errors():
    with pytest.raises(CaptureError, match="cannot split"):
        ncu_command(_app(command="run 'unclosed"), "a")
    with pytest.raises(CaptureError, match="empty"):
        ncu_command(_app(command="  "), "a")
    with pytest.raises(ValueError, match="expected e.g. sm_90"):
        compute_capability("hopper")
    assert [compute_capability(a) for a in ("sm_90", "90", "9.0", "sm_86", "sm_90a", None)] == [
        90,
        90,
        90,
        86,
        90,
        None,
    ]


def test_probe_parsers():
    query = (
        "Device NVIDIA H100 PCIe (GH100)\n-------- ---------\nMetric Name   Metric Description\n"
        "dram__bytes                      # of bytes accessed in DRAM\n"
        "sm__cycles_elapsed               # of cycles elapsed on SM\n"
    )
    assert parse_query_metrics(query) == {"dram__bytes", "sm__cycles_elapsed"}
    gpus = parse_gpu_list("NVIDIA H100 PCIe, GPU-1234, 550.54.15\nNVIDIA H100 PCIe, GPU-5678, 550.54.15\n")
    assert gpus[1] == {"name": "NVIDIA H100 PCIe", "uuid": "GPU-5678", "driver_version": "550.54.15"}


def test_workflow_plan_covers_capture_apps_only_and_excludes_resources_from_settings(tmp_path):
    (tmp_path / "a.ncu-rep").write_bytes(b"x")
    config = load_config(
        {
            "apps": {
                "imported": {"report": str(tmp_path / "a.ncu-rep")},
                "saxpy": {"command": "./saxpy", "gpu_model": "a100", "runtime": 5},
                "gemm": {"command": "./gemm"},
            },
            "capture": {"gpu_model": "h100", "mem_mb": 1000},
        }
    )
    apps = resolve_apps(config)
    plan = capture_plan(config, {n: a.kind for n, a in apps.items()})
    assert sorted(plan) == ["gemm", "saxpy"]
    assert plan["saxpy"]["gpu_model"] == "a100" and plan["saxpy"]["runtime"] == 5
    assert plan["gemm"]["gpu_model"] == "h100" and plan["gemm"]["runtime"] == 60
    assert plan["gemm"]["mem_mb"] == 1000
    settings = json.loads(plan["saxpy"]["settings"])
    assert settings["command"] == "./saxpy" and "runtime" not in settings and "gpu_model" not in settings
    assert app_regex(plan) == "gemm|saxpy"
    assert app_regex([]) == "(?!)"


# -- running a fake ncu ----------------------------------------------------------------------------

FAKE_NCU = r'''#!{python}
"""Hand-made stand-in for ncu (test only): behaviour {mode!r}."""
import shutil, subprocess, sys
args = sys.argv[1:]
mode = {mode!r}
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2099.1.0.0 (build 1) (fake)")
    sys.exit(0)
if args and args[0] == "--query-metrics":
    print("==ERROR== no GPU in this test", file=sys.stderr)
    sys.exit(1)
out = args[args.index("--export") + 1]
command = args[args.index("--force-overwrite") + 1:]
print("==PROF== Connected to process 4242 (fake)")
if mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
          "Performance Counters on the target device 0.")
    subprocess.call(command)
    sys.exit(0)
rc = subprocess.call(command)
if mode == "zero":
    print("==WARNING== No kernels were profiled.")
    sys.exit(rc)
if rc != 0:
    print(f"==ERROR== The application returned an error code ({{rc}}).")
    sys.exit(rc)
shutil.copy({report!r}, out)
print("==PROF== Report: " + out)
'''


def fake_ncu(folder: Path, mode: str = "ok") -> Path:
    """Write a fake ncu script; mode ok copies the real rmsnorm report to the export path."""
    if mode == "ok" and not RMSNORM.exists():
        pytest.skip(f"real fixture {RMSNORM} not found")
    path = folder / f"ncu-{mode}"
    path.write_text(FAKE_NCU.format(python=sys.executable, mode=mode, report=str(RMSNORM)))
    path.chmod(0o755)
    return path


def _capture(tmp_path: Path, ncu: Path, command: str, **settings) -> dict:
    return cap.capture(
        "app1",
        _app(command=command, **settings),
        tmp_path / "raw" / "app1.ncu-rep",
        tmp_path / "raw" / "app1.capture.json",
        ncu=str(ncu),
        run_id="r1",
    )


def test_successful_capture_writes_report_and_sidecar(tmp_path):
    ncu = fake_ncu(tmp_path)
    record = _capture(tmp_path, ncu, "echo hello", env={"ROOFLINE_TEST": "1"})
    report = tmp_path / "raw" / "app1.ncu-rep"
    assert report.read_bytes() == RMSNORM.read_bytes()
    sidecar = json.loads((tmp_path / "raw" / "app1.capture.json").read_text())
    assert sidecar == json.loads(json.dumps(record))
    assert sidecar["ncu"]["version"] == "2099.1.0.0"
    assert sidecar["command"][0] == str(ncu) and sidecar["command"][-2:] == ["echo", "hello"]
    assert sidecar["app_command"] == ["echo", "hello"]
    assert sidecar["run_id"] == "r1" and sidecar["host"] and sidecar["start"] and sidecar["end"]
    assert sidecar["metrics"]["availability"].startswith("ncu --query-metrics failed")
    assert sidecar["metrics"]["source"] in {"recipe-table", "compute-capability"}
    assert sidecar["returncode"] == 0 and sidecar["env"] == {"ROOFLINE_TEST": "1"}
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == ["app1.capture.json", "app1.ncu-rep"]


def test_counter_permission_error_names_the_fix(tmp_path):
    with pytest.raises(CaptureError, match="ERR_NVGPUCTRPERM") as error:
        _capture(tmp_path, fake_ncu(tmp_path, "perm"), "true")
    assert "NVreg_RestrictProfilingToAdminUsers=0" in str(error.value)
    assert not (tmp_path / "raw" / "app1.ncu-rep").exists()


def test_failing_application_is_quoted(tmp_path):
    command = "sh -c 'echo loading model >&2; echo CUDA out of memory >&2; exit 3'"
    with pytest.raises(CaptureError, match="exited with code 3") as error:
        _capture(tmp_path, fake_ncu(tmp_path, "fail"), command)
    assert "CUDA out of memory" in str(error.value)
    assert "==PROF==" not in str(error.value).split("last lines")[1]
    assert list((tmp_path / "raw").iterdir()) == []


def test_zero_kernels_points_at_the_filters(tmp_path):
    with pytest.raises(CaptureError, match="profiled no kernel") as error:
        _capture(tmp_path, fake_ncu(tmp_path, "zero"), "true", kernel_filter="regex:gemm", launch_skip=100)
    assert "kernel_filter (-k)='regex:gemm'" in str(error.value) and "launch_skip=100" in str(error.value)
    assert list((tmp_path / "raw").iterdir()) == []


def test_missing_ncu_is_a_clear_error(tmp_path, caplog):
    with pytest.raises(CaptureError, match=NCU_MISSING):
        probe.find_ncu(str(tmp_path / "no-such-ncu"))
    rc = cap.main(
        [
            "--app",
            "a",
            "--config-json",
            json.dumps({"command": "true"}),
            "--ncu",
            str(tmp_path / "nope"),
            "--output",
            str(tmp_path / "a.ncu-rep"),
            "--sidecar",
            str(tmp_path / "a.capture.json"),
        ]
    )
    assert rc == 1
    assert NCU_MISSING in caplog.text
    assert not (tmp_path / "a.ncu-rep").exists()


def test_main_rejects_invalid_settings(tmp_path, caplog):
    rc = cap.main(
        [
            "--app",
            "a",
            "--config-json",
            json.dumps({"command": "true", "launch_skip": -1}),
            "--output",
            str(tmp_path / "a.ncu-rep"),
            "--sidecar",
            str(tmp_path / "a.capture.json"),
        ]
    )
    assert rc == 2 and "invalid capture settings" in caplog.text


# -- the workflow with a fake ncu ------------------------------------------------------------------


def _snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        snakemake_command(workdir, *args),
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=workdir,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


def _write_config(workdir: Path, ncu: Path, command: str, run_id: str = "night-1") -> None:
    (workdir / "config.yaml").write_text(
        "# hand-made test config: one app captured by a fake ncu\n"
        f"inputs: []\nrun_id: {run_id}\n"
        f"apps:\n  rmsnorm: {{command: {json.dumps(command)}, gpu_model: h100}}\n"
        f"capture: {{ncu: {json.dumps(str(ncu))}}}\n"
    )


@pytest.mark.slow
def test_fake_ncu_capture_flows_through_the_workflow_and_reruns_only_on_capture_changes(tmp_path):
    from roofline.tables.files import read_table

    ncu = fake_ncu(tmp_path)
    _write_config(tmp_path, ncu, "echo profiled app")
    _snakemake(tmp_path, "--workflow-profile", str(REPO / "workflow" / "profiles" / "local"), "--cores", "2")
    sidecar = json.loads((tmp_path / "data" / "raw" / "rmsnorm.capture.json").read_text())
    assert sidecar["run_id"] == "night-1" and sidecar["app_command"] == ["echo", "profiled", "app"]
    assert "profiled app" in (tmp_path / "logs" / "capture" / "rmsnorm.log").read_text()
    classified = read_table(tmp_path / "data" / "classified" / "rmsnorm.parquet", "classified")
    assert len(classified) == 3
    assert (tmp_path / "reports" / "summary.html").exists()

    def planned() -> str:
        result = _snakemake(tmp_path, "-n", "--cores", "1")
        return result.stdout + result.stderr

    # (other stages may rerun when their modules are edited meanwhile: only capture is checked)
    assert "rule capture:" not in planned()
    _write_config(tmp_path, ncu, "echo profiled app --bigger")
    text = planned()
    assert "rule capture:" in text and "Params have changed" in text
    _write_config(tmp_path, ncu, "echo profiled app", run_id="night-2")
    text = planned()
    assert "rule capture:" in text and "night-2" in text
    _write_config(tmp_path, ncu, "echo profiled app")
    (tmp_path / "unrelated.txt").write_text("not an input\n")
    (tmp_path / "config.yaml").write_text((tmp_path / "config.yaml").read_text() + "report: {title: Other}\n")
    assert "rule capture:" not in planned()


# -- a real capture --------------------------------------------------------------------------------

SAXPY_CU = r"""
// Hand-made test program: one SAXPY launch, n = 1 << 20 (2n FP32 FLOP).
#include <cstdio>
__global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
int main() {
  const int n = 1 << 20;
  float *x, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMemset(x, 0, n * sizeof(float));
  cudaMemset(y, 0, n * sizeof(float));
  saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, x, y);
  cudaError_t err = cudaDeviceSynchronize();
  printf("saxpy: %s\n", cudaGetErrorString(err));
  return err == cudaSuccess ? 0 : 1;
}
"""


@pytest.mark.gpu
def test_real_capture_of_a_tiny_cuda_program(tmp_path):
    missing = [tool for tool in ("ncu", "nvidia-smi", "nvcc") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs a GPU with Nsight Compute and nvcc: {', '.join(missing)} not on PATH")
    from roofline.parse.counters import parse_input

    (tmp_path / "saxpy.cu").write_text(SAXPY_CU)
    subprocess.run(["nvcc", "-O2", "-o", str(tmp_path / "saxpy"), str(tmp_path / "saxpy.cu")], check=True)
    output = tmp_path / "raw" / "saxpy.ncu-rep"
    record = cap.capture(
        "saxpy",
        AppConfig(command="./saxpy", workdir=str(tmp_path)),
        output,
        tmp_path / "raw" / "saxpy.capture.json",
        run_id="gpu-test",
    )
    assert record["gpus"] and record["architecture"] and record["ncu"]["version"]
    counters = parse_input(output, "saxpy", "ncu-rep")
    assert len(counters) == 1
    assert counters["flop_fp32"].iat[0] == pytest.approx(2 * (1 << 20))
    assert counters["dram_bytes"].iat[0] > 0


def test_a_failed_capture_is_recorded_and_parse_reports_it(tmp_path, caplog):
    from roofline.errors import InputError
    from roofline.parse.counters import parse_input

    report, sidecar = tmp_path / "a.ncu-rep", tmp_path / "a.capture.json"
    rc = cap.main(
        [
            "--app",
            "a",
            "--config-json",
            json.dumps({"command": "true"}),
            "--ncu",
            str(tmp_path / "nope"),
            "--output",
            str(report),
            "--sidecar",
            str(sidecar),
            "--record-failure",
        ]
    )
    assert rc == 0 and report.read_bytes() == b""
    assert NCU_MISSING in json.loads(sidecar.read_text())["error"]
    with pytest.raises(InputError, match="the capture failed, so there is no report: .*ncu"):
        parse_input(report, "a", "ncu-rep")
