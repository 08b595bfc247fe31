"""SIGKILL a process in the middle of appends, 100 times: the store never loses or doubles rows."""

import multiprocessing
import os
import random
import shutil
import signal
import time

import pandas as pd
import pytest

from roofline.nightly.store import append_run, read_history

pytestmark = pytest.mark.slow

ROWS = 4
KILLS = 100


def _table(version: int) -> pd.DataFrame:
    """A tiny kernels table whose every row carries ``version`` (in ``launches``)."""
    return pd.DataFrame({"app": "app", "device": "GPU", "kernel": [f"k{i}" for i in range(ROWS)],
                         "grid": "(1, 1, 1)", "block": "(1, 1, 1)", "launches": version,
                         "duration_s": 1e-3})


def _appender(store: str, log: str, start: int) -> None:
    """Append forever: a few nights replaced over and over, and fresh nights; log each success."""
    version = start
    while True:
        version += 1
        run_id = f"r{version % 5}" if version % 3 else f"n{version % 40}"
        append_run(store, run_id, _table(version))
        with open(log, "a") as handle:
            handle.write(f"{run_id} {version}\n")
            handle.flush()
            os.fsync(handle.fileno())


def _check(store, expected: dict[str, int]) -> None:
    history = read_history(store)
    for run_id, rows in history.groupby("run_id"):
        assert len(rows) == ROWS, f"{run_id}: {len(rows)} rows"
        assert rows["kernel"].is_unique, f"{run_id}: duplicated rows"
        assert rows["launches"].nunique() == 1, f"{run_id}: rows of two appends mixed"
    stored = history.groupby("run_id")["launches"].first().to_dict()
    for run_id, version in expected.items():
        assert run_id in stored, f"{run_id} was appended (version {version}) and is lost"
        assert stored[run_id] >= version, f"{run_id}: version {stored[run_id]} < logged {version}"


def test_killed_appends_leave_a_consistent_store(tmp_path):
    ctx = multiprocessing.get_context("fork")  # no re-import of pandas per child: 100 kills fit in ~20 s
    store, log = tmp_path / "store", tmp_path / "appends.log"
    rng = random.Random(7)
    expected: dict[str, int] = {}
    seen_lines, completed = 0, 0
    started = time.perf_counter()
    append_run(tmp_path / "warm", "w", _table(0))
    append_time = time.perf_counter() - started  # kills spread over about four appends
    for kill in range(KILLS):
        child = ctx.Process(target=_appender, args=(str(store), str(log), kill * 100_000))
        child.start()
        time.sleep(rng.uniform(0.0, 4 * append_time))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        assert child.exitcode == -signal.SIGKILL
        lines = log.read_text().splitlines() if log.exists() else []
        for line in lines[seen_lines:]:
            run_id, version = line.split()
            expected[run_id] = int(version)
        completed += len(lines) > seen_lines
        seen_lines = len(lines)
        _check(store, expected)
        if kill % 20 == 19:  # drop the fresh nights, so that new-partition publishes keep happening
            for path in store.glob("run=n*"):
                shutil.rmtree(path)
            expected = {k: v for k, v in expected.items() if not k.startswith("n")}
    assert completed >= KILLS // 4, "too few children got an append done: kills were not mid-stream"
    append_run(store, "final", _table(0))  # cleans what the killed appends left behind
    assert not [p for p in store.iterdir() if p.name.startswith(".tmp-")]
    _check(store, {**expected, "final": 0})
