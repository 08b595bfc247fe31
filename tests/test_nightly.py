"""The nightly command of docs/tracking.md and the gate of README.md, run as the docs write them.

Both are read out of the documents, so that the documents and this test cannot drift: a clean night
exits 0, a night with a regressed kernel exits 3 (README.md, "Exit status for schedulers").
"""

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

from roofline.status import EXIT_REGRESSION

pytestmark = pytest.mark.slow


def _section(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end > 0 else len(text)]


def _first_block(section: str) -> list[str]:
    return re.search(r"```\w*\n(.*?)```", section, re.S).group(1).strip().splitlines()


def documented_night() -> tuple[str, str]:
    """(the nightly command, the gate), as docs/tracking.md's "Running it" writes them."""
    nightly, gate = _first_block(_section(REPO / "docs" / "tracking.md", "## Running it"))
    return nightly, gate


def readme_gate() -> str:
    """The gate as README.md's "Exit status for schedulers" writes it."""
    (gate,) = _first_block(_section(REPO / "README.md", "## Exit status for schedulers"))
    return gate


def test_the_docs_give_one_nightly_command_and_one_gate():
    nightly, gate = documented_night()
    assert gate == readme_gate()
    assert nightly.startswith("snakemake ") and " nightly " in nightly and nightly.endswith("|| exit 2")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"{nightly}\n{gate}\n" in readme  # the scheduler's two lines, the same in both
    cron = [line for line in (REPO / "docs" / "tracking.md").read_text(encoding="utf-8").splitlines()
            if re.match(r"\d+ \d+ \* \* \* ", line)]
    assert len(cron) == 2  # crontab and scrontab
    for line in cron:  # in a crontab % is \%, and the commands are the environment's
        unescaped = line.replace("\\%", "%").replace(".venv/bin/", "")
        assert f"{nightly}; {gate};" in unescaped, line


def _what_if(duration_s: float) -> str:
    return ("# hand-made what-if table (not measured)\n"
            "machines:\n  m: {compute: {fp32: 1.0e+12}, memory: {dram: 1.0e+11}}\n"
            "kernels:\n"
            f"  - {{name: scaled, machine: m, flop: {{fp32: 1.0e+9}}, bytes: {{dram: 1.0e+8}}, "
            f"duration_s: {duration_s}}}\n"
            "  - {name: steady, machine: m, flop: {fp32: 2.0e+9}, bytes: {dram: 1.0e+8}, duration_s: 4.0e-3}\n")


def _night(work: Path, date: str, duration_s: float) -> subprocess.CompletedProcess:
    """One night: the documented command and gate as one shell script in ``work`` (a project whose
    Snakefile includes this workflow), `date` answering ``date``."""
    (work / "inputs" / "app.yaml").write_text(_what_if(duration_s))
    (work / "bin" / "date").write_text(f"#!/bin/sh\necho {date}\n")
    (work / "bin" / "date").chmod(0o755)
    nightly, gate = documented_night()
    env = {**os.environ, "PATH": f"{work / 'bin'}:{REPO / '.venv' / 'bin'}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", f"{nightly}\n{gate}\n"], cwd=work, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_documented_night_exits_0_when_clean_and_3_on_a_regression(tmp_path):
    work = tmp_path / "project"
    for folder in ("inputs", "bin", "config"):
        (work / folder).mkdir(parents=True)
    snakefile = f'# hand-made: this workflow in a project of its own\ninclude: "{REPO / "Snakefile"}"\n'
    (work / "Snakefile").write_text(snakefile)
    (work / "config" / "config.yaml").write_text("# hand-made test config\ninputs: [inputs/*]\n")
    for day in (1, 2, 3, 4):  # clean nights: the history's first, then nights judged against it
        result = _night(work, f"2026-01-0{day}", 2.0e-3)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert (work / "data" / "history" / "run=2026-01-04").is_dir()
    assert (work / "reports" / "status.json").is_file() and (work / "reports" / "trends.html").is_file()
    result = _night(work, "2026-01-05", 4.0e-3)  # one kernel twice as slow
    assert result.returncode == EXIT_REGRESSION, result.stdout[-3000:] + result.stderr[-5000:]
    # the app's total GPU time (6 ms -> 8 ms) is a series of its own, and regressed with the kernel
    assert "1 kernel(s) and 1 app total(s) regressed tonight" in result.stderr
