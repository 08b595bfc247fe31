"""Status: diagnostics tables -> reports/status.json, and an exit status a scheduler can act on."""

import json
import subprocess
import sys

import pandas as pd
import pytest
from conftest import REPO

from roofline import status
from roofline.tables.files import write_table


def diag(app, severity, message="hand-made message", stage="parse", launch=float("nan")):
    return {"app": app, "stage": stage, "severity": severity, "source_file": f"inputs/{app}.ncu-rep",
            "launch": launch, "message": message}


def test_no_diagnostics_is_ok_and_lists_every_app():
    result = status.build_status([], apps=["b", "a"])
    assert result["ok"] is True and result["failed"] == []
    assert result["apps"] == {"a": {"status": "ok", "errors": 0, "warnings": 0},
                              "b": {"status": "ok", "errors": 0, "warnings": 0}}
    assert result["counts"] == {"apps": 2, "failed": 0, "warned": 0, "errors": 0, "warnings": 0, "input_warnings": 0}
    assert result["inputs"] == []


def test_errors_fail_the_run_and_warnings_do_not():
    tables = [
        pd.DataFrame([diag("broken", "error", "inputs/broken.ncu-rep: the file is empty; re-run ncu")]),
        pd.DataFrame([diag("odd", "warning", "launch 1 (k): cannot derive dram_bytes", launch=1.0),
                      diag("odd", "warning", "no ceiling", stage="ceilings")]),
        pd.DataFrame(columns=["app", "stage", "severity", "source_file", "launch", "message"]),
    ]
    result = status.build_status(tables, apps=["broken", "odd", "fine"])
    assert result["ok"] is False
    assert result["apps"]["broken"]["status"] == "failed"
    assert result["apps"]["odd"] == {"status": "warning", "errors": 0, "warnings": 2}
    assert result["apps"]["fine"]["status"] == "ok"
    assert result["failed"] == [{"app": "broken", "stage": "parse", "source_file": "inputs/broken.ncu-rep",
                                 "message": "inputs/broken.ncu-rep: the file is empty; re-run ncu"}]
    assert result["counts"] == {"apps": 3, "failed": 1, "warned": 1, "errors": 1, "warnings": 2, "input_warnings": 0}
    assert "broken" in status.summary_line(result)


def test_the_status_does_not_depend_on_the_order_of_tables():
    a = pd.DataFrame([diag("a", "error", "x"), diag("a", "error", "w")])
    b = pd.DataFrame([diag("b", "error", "y")])
    one = json.dumps(status.build_status([a, b], ["a", "b"]), sort_keys=True)
    two = json.dumps(status.build_status([b, a.iloc[::-1]], ["b", "a"]), sort_keys=True)
    assert one == two


@pytest.mark.parametrize("path, app", [
    ("data/diagnostics/gemm.parse.parquet", "gemm"),
    ("data/diagnostics/my.app.v2.ceilings.parquet", "my.app.v2"),
    ("x/a-b_c.parse.parquet", "a-b_c"),
])
def test_app_of_a_diagnostics_file(path, app):
    assert status.app_of(path) == app


def _write_run(tmp_path, error: bool):
    paths = []
    for app in ("one", "two.v2"):
        for stage in ("parse", "ceilings"):
            rows = [diag(app, "error", f"inputs/{app}: broken")] if error and app == "one" and stage == "parse" else []
            path = tmp_path / "data" / "diagnostics" / f"{app}.{stage}.parquet"
            write_table(pd.DataFrame(rows), "diagnostics", path)
            paths.append(str(path))
    return paths


@pytest.mark.parametrize("error, code", [(False, 0), (True, 1)])
def test_main_writes_the_status_and_check_gives_the_exit_status(tmp_path, error, code):
    paths = _write_run(tmp_path, error)
    output = tmp_path / "reports" / "status.json"
    assert status.main(["--diagnostics", *paths, "--output", str(output)]) == 0
    written = json.loads(output.read_text())
    assert sorted(written["apps"]) == ["one", "two.v2"] and written["ok"] is (not error)
    first = output.read_bytes()
    status.main(["--diagnostics", *reversed(paths), "--output", str(output)])
    assert output.read_bytes() == first, "deterministic: no timestamp, sorted keys"
    assert status.main(["--check", str(output)]) == code
    command = [sys.executable, "-m", "roofline.status", "--check", str(output)]
    assert subprocess.run(command, cwd=REPO, capture_output=True).returncode == code


def test_check_without_a_readable_status_is_not_success(tmp_path, capsys):
    assert status.main(["--check", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "half.json").write_text('{"ok": tr')  # hand-made: a cut file
    assert status.main(["--check", str(tmp_path / "half.json")]) == 2
    assert "did not finish" in capsys.readouterr().err


def test_a_failed_write_leaves_the_old_status(tmp_path, monkeypatch):
    paths = _write_run(tmp_path, error=True)
    output = tmp_path / "status.json"
    status.main(["--diagnostics", *paths, "--output", str(output)])
    before = output.read_bytes()

    def broken(*args, **kwargs):
        raise OSError("disk full (hand-made)")

    monkeypatch.setattr(status.json, "dumps", broken)
    with pytest.raises(OSError):
        status.main(["--diagnostics", *paths, "--output", str(output)])
    assert output.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".status.json")] == []


def test_the_workflow_builds_the_status_by_default():
    text = (REPO / "workflow" / "rules" / "common.smk").read_text()
    assert '"reports/status.json"' in text
    assert 'include: "workflow/rules/status.smk"' in (REPO / "Snakefile").read_text()


def test_check_fails_on_regressions_when_asked(tmp_path):
    import json as _json

    from roofline.status import EXIT_REGRESSION, check

    status = tmp_path / "status.json"
    status.write_text(_json.dumps({"ok": True, "counts": {"apps": 1, "failed": 0, "warnings": 0}, "failed": []}))
    regressions = tmp_path / "regressions.json"
    regressions.write_text(_json.dumps({"counts": {"regression": 2}}))
    assert check(status) == 0
    assert check(status, regressions) == EXIT_REGRESSION
    regressions.write_text(_json.dumps({"counts": {"regression": 0}}))
    assert check(status, regressions) == 0
    assert check(status, tmp_path / "missing.json") == 2


NOTHING = {"pattern": "captures/*.ncu-rep", "problem": "'captures/*.ncu-rep' matches no file",
           "fix": "check that the capture ran", "path": ""}


def test_an_input_that_gave_no_app_is_not_ok_and_listed():
    result = status.build_status([], apps=["good"], sources={"good": "inputs/good.yaml"}, inputs=[NOTHING])
    assert result["ok"] is False and result["failed"] == []
    assert result["inputs"] == [NOTHING] and result["counts"]["input_warnings"] == 1
    assert result["apps"]["good"] == {"status": "ok", "errors": 0, "warnings": 0, "source": "inputs/good.yaml"}
    line = status.summary_line(result)
    assert "captures/*.ncu-rep" in line and "check that the capture ran" in line and "1 input(s) gave no app" in line


@pytest.mark.parametrize("failed, inputs, code", [
    (False, [], 0),
    (False, [NOTHING], status.EXIT_NO_INPUT),
    (True, [NOTHING], 1),  # a failed input is named first; the summary line lists both
    (True, [], 1),
])
def test_check_exit_status_for_inputs_that_gave_no_app(tmp_path, failed, inputs, code, capsys):
    tables = [pd.DataFrame([diag("broken", "error", "inputs/broken.ncu-rep: empty")])] if failed else []
    path = tmp_path / "status.json"
    path.write_text(json.dumps(status.build_status(tables, ["good", "broken"], inputs=inputs)))
    assert status.check(path) == code
    assert ("captures/*.ncu-rep" in capsys.readouterr().err) is bool(inputs)
    assert status.EXIT_NO_INPUT == 4 and status.EXIT_NO_INPUT not in {0, 1, 2, status.EXIT_REGRESSION}


def test_check_reads_a_status_written_before_the_inputs_list(tmp_path):
    path = tmp_path / "status.json"  # hand-made: the version 1 layout without "inputs"
    path.write_text(json.dumps({"ok": True, "counts": {"apps": 1, "failed": 0, "warnings": 0}, "failed": []}))
    assert status.check(path) == 0


def test_main_writes_sources_and_inputs(tmp_path):
    paths = _write_run(tmp_path, error=False)
    output = tmp_path / "status.json"
    status.main(["--diagnostics", *paths, "--output", str(output), "--sources", json.dumps({"one": "in/one (1).csv"}),
                 "--input-problems", json.dumps([NOTHING])])
    written = json.loads(output.read_text())
    assert written["apps"]["one"]["source"] == "in/one (1).csv" and "source" not in written["apps"]["two.v2"]
    assert written["inputs"] == [NOTHING]
    assert subprocess.run([sys.executable, "-m", "roofline.status", "--check", str(output)], cwd=REPO,
                          capture_output=True).returncode == status.EXIT_NO_INPUT
