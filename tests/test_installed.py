"""The installed package is complete: a wheel built from this checkout, installed into a fresh
virtual environment without network, runs the ``roofline`` command from an unrelated directory, so
the GPU catalog, the config schema and the page assets ship as package data (nothing is read from
the checkout)."""

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import REPO, nersc_sm_clock, real_fixture

pytestmark = pytest.mark.slow  # a wheel, a venv and five commands: ~15 s

PACKAGE_DATA = ("roofline/data/gpus.yaml", "roofline/data/config.schema.json", "roofline/data/detection_figures.json",
                "roofline/assets/report.css",
                "roofline/assets/report.js", "roofline/__main__.py", "roofline/api.py")
A100_80 = "NVIDIA A100-SXM4-80GB"


def uv() -> str | None:
    found = shutil.which("uv") or REPO / ".bootstrap" / "bin" / "uv"
    return str(found) if Path(found).is_file() else None


def build_wheel(out: Path) -> Path:
    """A wheel of the checkout, built offline: with uv (its cache holds hatchling), else with pip
    and the hatchling installed here; skips, saying why, when neither can build."""
    tried = []
    if uv():
        command = [uv(), "build", "--wheel", "--offline", "--out-dir", str(out), str(REPO)]
        tried.append(subprocess.run(command, capture_output=True, text=True))
    else:
        tried.append(None)
    if not list(out.glob("*.whl")):
        try:
            import hatchling  # noqa: F401
        except ImportError:
            pass
        else:
            command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                       "-w", str(out), str(REPO)]
            tried.append(subprocess.run(command, capture_output=True, text=True))
    wheels = list(out.glob("*.whl"))
    if not wheels:
        why = "; ".join(r.stderr.strip().splitlines()[-1] if r and r.stderr.strip() else "uv not found" for r in tried)
        pytest.skip(f"cannot build a wheel offline here (uv build --offline, or pip with hatchling installed): {why}")
    return wheels[0]


def install(wheel: Path, venv: Path) -> Path:
    """A fresh venv with only the wheel installed (no network); the project venv's site-packages
    comes after the venv's own (a .pth file) for the dependencies. Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    if uv():
        command = [uv(), "pip", "install", "--offline", "--no-deps", "--python", str(python), str(wheel)]
        subprocess.run(command, check=True, capture_output=True)
    else:
        subprocess.run([str(python), "-m", "ensurepip", "--default-pip"], check=True, capture_output=True)
        command = [str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)]
        subprocess.run(command, check=True, capture_output=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # .pth lines are appended after the directory that holds them, so the wheel's roofline wins; the
    # project's editable-install .pth is not processed there, so the checkout is not on the path.
    (Path(site) / "zz_project_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


def test_wheel_installs_a_complete_package(tmp_path):
    report = next(real_fixture("a100sxm-silu-full-ncu2025.1").glob("*.ncu-rep"))
    export = real_fixture("a100-dropout-nersc-metrics-csv") / "nsight162.csv"
    wheel = build_wheel(tmp_path / "dist")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(PACKAGE_DATA) <= names, sorted(set(PACKAGE_DATA) - names)
    assert not any(n.startswith(("tests/", "workflow/", "config/")) for n in names)

    python = install(wheel, tmp_path / "venv")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"

    def run(*argv: str) -> subprocess.CompletedProcess:
        done = subprocess.run([str(a) for a in argv], cwd=elsewhere, env=env, capture_output=True, text=True)
        assert "Traceback" not in done.stderr, done.stderr
        return done

    where = run(python, "-c", "import json, roofline, roofline.ceilings.catalog as c, roofline.pages.page as r; "
                "from importlib.resources import files; print(json.dumps([roofline.__file__, str(c.CATALOG_PATH), "
                "str(files('roofline') / 'data' / 'config.schema.json'), str(r.ASSETS)]))")
    assert where.returncode == 0, where.stderr
    package, catalog, schema, assets = (Path(p) for p in json.loads(where.stdout))
    assert package.is_relative_to(tmp_path / "venv") and not package.is_relative_to(REPO)
    assert catalog.is_file() and catalog.is_relative_to(package.parent)
    assert json.loads(schema.read_text())["title"] and schema.is_relative_to(package.parent)
    assert (assets / "report.css").is_file() and Path(str(assets)).is_relative_to(package.parent)

    shown = run(python.parent / "roofline", "show", report)  # the console script of the wheel
    assert shown.returncode == 0 and "silu_kernel" in shown.stdout and "memory:dram" in shown.stdout

    named = run("roofline", "show", export, "--device", A100_80, "--format", "json")
    (kernel,) = json.loads(named.stdout)
    assert named.returncode == 0 and kernel["device"] == A100_80 and kernel["bound"] == "memory:dram"
    assert kernel["ceiling_source"] == "datasheet"  # the roofs of the catalog shipped in the wheel

    roofs = run(python, "-m", "roofline", "ceilings", export, "--device", A100_80, "--format", "csv")
    rows = {(r["kind"], r["name"]): r for r in csv.DictReader(io.StringIO(roofs.stdout))}
    sheet = next(e for e in yaml.safe_load((REPO / "roofline" / "data" / "gpus.yaml").read_text())["gpus"].values()
                 if A100_80 in e["names"])
    assert roofs.returncode == 0 and float(rows[("memory", "dram")]["value"]) == sheet["memory"]["dram"]["value"]
    # the datasheet's FP32 roof held at the SM clock the export's launches ran at (docs/ceilings.md)
    fp32 = rows[("compute", "fp32")]
    held = sheet["compute"]["fp32"]["value"] / sheet["boost_clock_hz"] * float(fp32["clock_hz"])
    assert float(fp32["value"]) == pytest.approx(held, rel=1e-9)
    assert float(fp32["clock_hz"]) == pytest.approx(nersc_sm_clock(export), rel=1e-9)
    dram = rows[("memory", "dram")]
    assert dram["source"] == "datasheet" and "a100_sxm4_80gb" in dram["citation"]

    page = elsewhere / "out" / "summary.html"
    wrote = run("roofline", "report", report, "-o", page)
    assert wrote.returncode == 0, wrote.stderr
    css = (REPO / "roofline" / "assets" / "report.css").read_text().strip().splitlines()[0]
    html = page.read_text()
    assert "silu_kernel" in html and css in html and (elsewhere / "out" / "apps").is_dir()
