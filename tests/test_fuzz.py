"""Fuzz: mutated copies of the real reports never crash the analysis, and a good input beside them
is always analysed (issue #47: one malformed export stopped the whole batch).

Every mutant is built at test time, from the real fixtures in ../shared/fixtures/real (nothing is
copied into the repository), with a fixed seed: bit flips, cuts, duplicated ranges (a half-written
or concatenated export), ranges zeroed with ASCII '0's (numbers become 0) or NUL bytes. Mostly CSV
exports (cheap to read), a few small ``.ncu-rep`` reports. They go through ``roofline show`` in
process (:func:`roofline.cli.main`), several mutants and one unmutated copy of a real export per
call, so that the good file shares the mutants' devices and so their ceilings: the call never
raises, exits 0 or 1, and the good file's kernels are in its output. A few mutants also go through
the workflow beside good inputs (marker ``slow``): it finishes, writes status.json, and the good
inputs' pages are written.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import real_fixture, snakemake_command

from roofline import cli

SEED = 47
# (fixture folder, file, mutants): CSV exports of four formats and sizes, two small reports
SOURCES = [
    ("rtx5060-wmma-fp16-rawcsv-ncu2026.1", "gen5_stall_async8.csv", 90),
    ("rtx5090-llm-kernels-csv-ncu2025", "kernel_0005_e67789a8b6cb9adf2cb8d4d3745a9a79/ncu.metrics.csv", 60),
    ("rtx5090-llm-kernels-csv-ncu2025",
     "kernel_0005_e67789a8b6cb9adf2cb8d4d3745a9a79/ncu.section_SpeedOfLight_RooflineChart.csv", 40),
    ("gtx1080-vecadd-legacy-rawcsv", "nsight_vectoradd_100_32_metrics_all.csv", 40),
    ("h200-sglang-qwen3moe-rawcsv-ncu2026.1", "R_short_decode_ncu_raw_full.csv", 30),
    ("rtx3070-vecadd-basic-ncu2022.3", "CuVectorAddDrv.ncu-rep", 12),
    ("rtx4060ti-flashattn-fp16-tensorroofline-ncu2025.4", "fa3_before_n4096.ncu-rep", 8),
]
PER_CALL = 8  # mutants per call, beside one good file


def _span(rng: random.Random, size: int, longest: int) -> tuple[int, int]:
    start = rng.randrange(size)
    return start, min(size, start + rng.randint(1, longest))


def _flip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def _cut(rng: random.Random, data: bytes) -> bytes:
    if rng.random() < 0.5:
        return data[: rng.randrange(len(data))]  # truncated
    a, b = _span(rng, len(data), 4000)
    return data[:a] + data[b:]  # a range lost


def _duplicate(rng: random.Random, data: bytes) -> bytes:
    a, b = _span(rng, len(data), 3000)
    return data[:b] + data[a:b] + data[b:]


def _zero(rng: random.Random, data: bytes) -> bytes:
    a, b = _span(rng, len(data), 200)
    return data[:a] + (b"0" if rng.random() < 0.7 else b"\x00") * (b - a) + data[b:]


MUTATIONS: list[Callable[[random.Random, bytes], bytes]] = [_flip, _cut, _duplicate, _zero]


def _mutants(tmp: Path) -> list[tuple[Path, Path]]:
    """(mutant, its source's good copy) for every source present; the good copy is written once."""
    rng = random.Random(SEED)
    tmp.mkdir(parents=True, exist_ok=True)
    built = []
    for folder, name, count in SOURCES:
        try:
            source = real_fixture(folder) / name
        except pytest.skip.Exception:
            continue
        if not source.exists():
            continue
        data, suffix = source.read_bytes(), source.suffix
        good = tmp / f"good_{len(built)}{suffix}"
        good.write_bytes(data)
        for i in range(count):
            mutation = MUTATIONS[i % len(MUTATIONS)]
            path = tmp / f"m{len(built):03d}_{mutation.__name__[1:]}{suffix}"
            path.write_bytes(mutation(rng, data))
            built.append((path, good))
    if not built:
        pytest.skip("real fixtures absent: the mutants derive from ../shared/fixtures/real")
    return built


def _show(paths: list[Path]) -> tuple[int, str]:
    """``roofline show --format json`` in process: (exit status, stdout); an exception propagates."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = cli.main(["show", "--format", "json", "--top", "100000", *map(str, paths)])
    return status, out.getvalue()


def _analysed_apps(stdout: str) -> set[str]:
    return {row["app"] for row in json.loads(stdout)} if stdout.strip() else set()


def test_mutated_reports_never_crash_and_the_good_input_beside_them_is_analysed(tmp_path):
    mutants = _mutants(tmp_path)
    by_good: dict[Path, list[Path]] = {}
    for path, good in mutants:
        by_good.setdefault(good, []).append(path)
    for good, paths in by_good.items():
        for start in range(0, len(paths), PER_CALL):
            batch = paths[start:start + PER_CALL]
            try:
                status, stdout = _show([*batch, good])
            except Exception as error:  # name the mutant that did it
                culprits = []
                for path in batch:
                    try:
                        _show([path, good])
                    except Exception as alone:  # noqa: BLE001 - the test reports every one
                        culprits.append(f"{path.name}: {type(alone).__name__}: {alone}")
                pytest.fail(f"an uncaught {type(error).__name__} ({error}) beside {good.name}; alone: {culprits}")
            assert status in (0, 1), f"{[p.name for p in batch]} beside {good.name}: exit {status}"
            assert good.stem in _analysed_apps(stdout), f"{good.name} not analysed beside {[p.name for p in batch]}"


@pytest.mark.slow
def test_a_few_mutants_beside_good_inputs_through_the_workflow(tmp_path):
    """The issue's case (the RTX 5060 raw export with a header range written twice: a 0 clock that
    stopped the ceilings job, which holds every device) and two fuzz mutants (ASCII zeros in the same
    export, a cut report) beside good inputs of other devices: an RTX 5090 export and the textbook
    what-if table. (Beside a good launch of the same device the median clock hid the 0; the
    in-process test has those.)"""
    from bad_inputs import TEXTBOOK, case

    inputs = tmp_path / "inputs"
    case("rawcsv_duplicated_header_range").build(inputs)
    mutants = _mutants(tmp_path / "fuzz")
    picked = [p for p, _ in mutants if p.name.startswith(("m003_", "m261_"))]
    for path in picked:
        (inputs / path.name).write_bytes(path.read_bytes())
    good_csv = next(good for path, good in mutants if path.name.startswith("m090_"))  # the RTX 5090 export
    (inputs / "good_rtx5090.csv").write_bytes(good_csv.read_bytes())
    (inputs / "good.yaml").write_bytes(TEXTBOOK.read_bytes())
    (tmp_path / "config.yaml").write_text("# hand-made test config\ninputs: [inputs/*]\nrun_id: fuzz\n")
    result = subprocess.run(snakemake_command(tmp_path, "--cores", "2"), capture_output=True, text=True,
                            timeout=600, cwd=tmp_path)
    assert result.returncode == 0, f"snakemake failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    status = json.loads((tmp_path / "reports" / "status.json").read_text(encoding="utf-8"))
    for app in ("good_rtx5090", "good"):
        assert status["apps"][app]["status"] != "failed", status["apps"][app]
        assert (tmp_path / "reports" / "apps" / f"{app}.html").is_file()
    assert status["apps"]["dup_range"]["status"] != "failed"  # kept, its absurd values refused
    summary = (tmp_path / "reports" / "summary.html").read_text(encoding="utf-8")
    assert "l1_clock_hz refused" in summary
