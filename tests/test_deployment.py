"""The workflow deployed the ways Snakemake users deploy it: as a ``module`` of their own project
(what snakedeploy writes), and with ``--software-deployment-method conda``."""

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SNAKEMAKE

from roofline.tables.files import read_table

pytestmark = pytest.mark.slow
ENV_FILE = REPO / "workflow" / "envs" / "roofline.yaml"


def _project(root: Path) -> Path:
    """A user's project in a temporary directory: their config and inputs, the workflow as a module."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config").mkdir()
    (root / "inputs").mkdir()
    shutil.copy(REPO / "data" / "examples" / "textbook.yaml", root / "inputs" / "textbook.yaml")
    (root / "config" / "config.yaml").write_text("# hand-made: a user's project config\ninputs: [inputs/*.yaml]\n")
    (root / "Snakefile").write_text(
        "# hand-made: a user's project using roofline as a module, as snakedeploy writes it\n"
        'configfile: "config/config.yaml"\n\n\n'
        f"module roofline:\n    snakefile:\n        {str(REPO / 'Snakefile')!r}\n    config:\n        config\n\n\n"
        "use rule * from roofline as roofline_*\n"
    )
    return root


def _snakemake(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SNAKEMAKE, "--cores", "2", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env)


def test_the_workflow_runs_as_a_module_of_another_project(tmp_path):
    project = _project(tmp_path / "my project")
    result = _snakemake(project)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-5000:]
    # Paths come from the workflow's own folder (catalog, schema, package), outputs land in the project.
    classified = read_table(project / "data" / "classified" / "textbook.parquet", "classified")
    assert "seed_normalization" in set(classified["kernel"])
    assert (project / "reports" / "summary.html").stat().st_size > 100_000
    for rule in ("parse", "ceilings", "classify_app", "report", "status", "track_history", "trends_page"):
        assert re.search(rf"^local(rule|checkpoint) roofline_{rule}:", log, re.M), rule
    assert "not present in the Snakefile" not in log and "Traceback" not in log


def test_a_config_error_in_the_module_is_one_workflow_error_not_an_exit(tmp_path):
    project = _project(tmp_path / "p")
    (project / "config" / "config.yaml").write_text(
        "# hand-made: a typo in a key\ninputs: [x]\nceilings: {polcy: []}\n")
    result = _snakemake(project, "-n")
    assert result.returncode == 1
    said = result.stdout + result.stderr
    assert "WorkflowError" in said and "unknown config key 'ceilings.polcy': remove it" in said, said[-3000:]
    assert "SystemExit" not in said and "Traceback" not in said


def _conda_stand_in(folder: Path) -> Path:
    """A stand-in ``conda`` that answers the three questions Snakemake asks while planning a dry run
    (this machine reaches no conda channel, so there is no real conda to ask)."""
    folder.mkdir()
    script = folder / "conda"
    script.write_text(
        "#!/bin/sh\n# hand-made stand-in for conda: answers what snakemake asks while planning a dry run\n"
        'case "$1" in\n'
        '  --version) echo "conda 24.7.1";;\n'
        "  info) echo '{\"conda_prefix\": \"/opt/conda\", \"envs_dirs\": [\"/opt/conda/envs\"], "
        "\"platform\": \"linux-64\", \"conda_version\": \"24.7.1\"}';;\n"
        "  config) echo '{\"get\": {\"channel_priority\": \"strict\"}}';;\n"
        '  *) echo "conda stand-in: $* is not available here" >&2; exit 1;;\n'
        "esac\n"
    )
    script.chmod(0o755)
    return folder


def test_a_conda_dry_run_plans_every_rule_with_the_workflows_environment(tmp_path):
    project = _project(tmp_path / "p")
    (project / "config" / "config.yaml").write_text(
        "# hand-made: imported tables and one captured app, so that every rule is planned\n"
        "inputs: [inputs/*.yaml]\napps:\n  saxpy: {command: ./saxpy}\nceilings: {measure: true}\n")
    env = {**os.environ, "PATH": f"{_conda_stand_in(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}"}
    planned = _snakemake(project, "-n", "--sdm", "conda", env=env)
    assert planned.returncode == 0, planned.stderr[-4000:]
    stats = planned.stdout[planned.stdout.index("Job stats:"):]
    for rule in ("capture", "measure", "parse", "ceilings", "classify_app", "report", "status",
                 "track_history", "trends_page"):
        assert re.search(rf"^roofline_{rule}\s+\d+$", stats, re.M), rule
    listed = _snakemake(project, "-n", "--sdm", "conda", "--list-conda-envs", env=env)
    assert listed.returncode == 0, listed.stderr[-4000:]
    lines = listed.stdout.splitlines()
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("environment\t")) + 1:]
    envs = [line.split("\t")[0] for line in table if line.strip()]
    assert [Path(e).resolve() for e in envs] == [ENV_FILE.resolve()]
    # and `snakemake --lint` (tests/test_workflow.py) fails for a rule without a conda environment


def test_the_conda_environment_holds_every_runtime_dependency_of_the_package():
    """The rules put the workflow's package on PYTHONPATH, so the environment must hold what it
    imports: every runtime dependency of pyproject.toml but Snakemake (which runs outside the job)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = {re.split(r"[<>=!~ \[]", d, maxsplit=1)[0].lower() for d in project["dependencies"]} - {"snakemake"}
    environment = yaml.safe_load(ENV_FILE.read_text())
    listed = set()
    for entry in environment["dependencies"]:
        for spec in entry["pip"] if isinstance(entry, dict) else [entry]:
            listed.add(re.split(r"[<>=!~ ]", spec, maxsplit=1)[0].lower())
    assert wanted <= listed, f"missing from {ENV_FILE.name}: {sorted(wanted - listed)}"
    assert "python" in listed


def test_a_full_conda_run_builds_the_environment_and_runs_every_job_in_it(tmp_path):
    if shutil.which("conda") is None or os.environ.get("ROOFLINE_TEST_CONDA") != "1":
        pytest.skip("a full --sdm conda run needs conda and the conda-forge channel (not reachable on this "
                    "machine); set ROOFLINE_TEST_CONDA=1 where they are")
    project = _project(tmp_path / "p")
    result = _snakemake(project, "--sdm", "conda")
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    assert "Activating conda environment" in result.stdout + result.stderr
    assert (project / "reports" / "summary.html").stat().st_size > 100_000
