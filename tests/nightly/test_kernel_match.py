"""Kernel identity through a code change (issue #46 item 1): one matching rule
(roofline.nightly.kernel_match) for the nightly tracking and roofline compare. The nightly histories here
are hand-made; the FlashAttention pair is real."""

import warnings

import pandas as pd
import pytest

from roofline.nightly import kernel_match
from roofline.nightly.app_total import APP_TOTAL
from roofline.nightly.engine import decide_all
from roofline.nightly.params import DecisionParams
from roofline.nightly.state import update
from roofline.nightly.store import append_run, history_frame, read_decisions
from roofline.nightly.summary import summarize
from tests.conftest import real_fixture

NOISE = (1.0, 1.01, 0.99, 1.005)  # night-to-night wobble of a quiet kernel


def nights(kernels_per_night: list[list[tuple[str, str, float]]], app: str = "app") -> pd.DataFrame:
    """A hand-made history: per night, (full name, grid, time per launch [s]) of each kernel."""
    rows = []
    for n, kernels in enumerate(kernels_per_night):
        day = f"2026-03-{1 + n:02d}"
        for name, grid, t in kernels:
            rows.append({"run_id": day, "run_date": day, "app": app, "device": "GPU", "kernel": name,
                         "grid": grid, "block": "(128, 1, 1)", "launches": 1, "duration_s": t * NOISE[n % 4],
                         "flop": 1e11, "flop_total": 1e11, "dram_bytes": 1e8, "bound": "compute:tensor_int8"})
    return history_frame(pd.DataFrame(rows))


def cutlass(kernel_class: str, mainloop: str, tile: str) -> str:
    return (f"void cutlass::Kernel<cutlass::gemm::kernel::{kernel_class}<cutlass::gemm::threadblock::{mainloop}"
            f"<cutlass::gemm::GemmShape<{tile}, 64>, int8_t>, cutlass::epilogue::Epilogue>>(T1::Params)")


def last_night(decisions: pd.DataFrame) -> pd.DataFrame:
    """The last night's kernel series (the app's total, a series of its own, is :func:`app_total`'s)."""
    last = decisions["run_id"] == decisions["run_id"].max()
    return decisions[last & (decisions["kernel"] != APP_TOTAL)].reset_index(drop=True)


def app_total(decisions: pd.DataFrame) -> pd.Series:
    """The last night's record of the app's total GPU time."""
    last = decisions[decisions["run_id"] == decisions["run_id"].max()]
    return last[last["kernel"] == APP_TOTAL].iloc[0]


@pytest.mark.parametrize(("after_class", "evidence"), [
    ("Gemm", "matched by kernel class and launch configuration: template arguments changed"),
    ("GemmUniversal", "matched by launch configuration: template arguments changed")])
def test_a_cutlass_mainloop_change_is_two_regressions_not_missing_and_new(tmp_path, after_class, evidence):
    """Hand-made: two int8 GEMMs ``cutlass::Kernel<…>``, each launch configuration unique; the
    mainloop changes (the kernel class too, in the second case) and they run 12 % and 18 % slower.
    The night of the change: two regressions, each saying how it was matched, no missing or new,
    the gate red; the series carry on under their new names as a new segment."""
    before = [(cutlass("Gemm", "MmaPipelined", "128, 128"), "(64, 1, 1)", 1e-3),
              (cutlass("Gemm", "MmaPipelined", "256, 128"), "(32, 2, 1)", 2e-3)]
    after = [(cutlass(after_class, "MmaMultistage", "128, 128"), "(64, 1, 1)", 1.12e-3),
             (cutlass(after_class, "MmaMultistage", "256, 128"), "(32, 2, 1)", 2.36e-3)]
    history = nights([before] * 10 + [after])
    decisions = decide_all(history)
    tonight = last_night(decisions)
    assert tonight["label"].tolist() == ["regression", "regression"]
    total = app_total(decisions)  # 3 ms -> 3.48 ms x 0.99: the app's total regressed with them
    assert total["label"] == "regression" and total["ratio"] == pytest.approx(3.48 / 3, abs=0.015)
    assert sorted(tonight["ratio"]) == pytest.approx([1.12, 1.18], abs=0.015)  # tonight's wobble: 0.99
    assert all(n.startswith(evidence + " (was void cutlass::Kernel<") for n in tonight["note"])
    assert (tonight["segment"] == 1).all() and (tonight["segment_start"] == "2026-03-11").all()
    assert tonight["n_baseline"].tolist() == [7, 7]  # judged against the nights before the change
    summary = summarize(decisions[decisions["run_id"] == "2026-03-11"], {"run_id": "2026-03-11"}, DecisionParams())
    assert summary["alert"] and summary["counts"]["regression"] == 2 + 1 and summary["app_total_regressions"] == 1
    assert summary["counts"]["missing"] == summary["counts"]["new"] == summary["counts"]["moved"] == 0
    # the nightly path (the stored state, one night at a time) decides the same
    store = tmp_path / "history"
    for run_id, night in history.groupby("run_id"):
        append_run(store, run_id, night)
        update(store, DecisionParams(), changed=[run_id])
    stored = last_night(read_decisions(store, ["2026-03-11"]))
    assert stored["label"].tolist() == ["regression", "regression"]
    assert stored["note"].tolist() == tonight["note"].tolist()
    # the next night at the new level: still the same series, a regression that persists
    history = nights([before] * 10 + [after] * 2)
    assert last_night(decide_all(history))["label"].tolist() == ["regression", "regression"]


def test_without_the_change_the_labels_are_those_of_a_quiet_series():
    before = [(cutlass("Gemm", "MmaPipelined", "128, 128"), "(64, 1, 1)", 1e-3),
              (cutlass("Gemm", "MmaPipelined", "256, 128"), "(32, 2, 1)", 2e-3)]
    decisions = decide_all(nights([before] * 11))
    assert set(last_night(decisions)["label"]) == {"unchanged"} and not decisions["note"].str.contains("matched").any()


def test_a_triton_configuration_suffix_change_is_followed():
    """Hand-made: an autotuned Triton kernel whose name carries its configuration gets another
    configuration (and grid); a second Triton kernel keeps its name. Followed by the name without
    the suffix: 15 % slower is a regression, not missing and new."""
    other = ("triton_red_fused_softmax_0", "(4096, 1, 1)", 5e-4)
    tuned = "matmul_kernel_BLOCK_SIZE_M_{}_BLOCK_SIZE_N_{}_GROUP_SIZE_M_8_num_warps_{}"
    before = [(tuned.format(128, 64, 4), "(256, 1, 1)", 1e-3), other]
    after = [(tuned.format(64, 128, 8), "(512, 1, 1)", 1.15e-3), other]
    tonight = last_night(decide_all(nights([before] * 10 + [after])))
    assert tonight["label"].tolist() == ["regression", "unchanged"]
    assert tonight["note"][0].startswith("matched by name without its configuration: configuration changed")
    assert kernel_match.kernel_class(after[0][0]) == "matmul_kernel"
    assert kernel_match.kernel_class("_attn_fwd_0d1d2d3de") == "_attn_fwd"


def test_a_rename_given_in_the_config_is_followed():
    """Hand-made: two kernels of one launch configuration, one renamed by a rewrite; nothing but the
    config's rename map says which is which: without it missing and new, with it a regression."""
    same = "(108, 1, 1)"
    before = [("void reduce_v1(const float *, float *, int)", same, 1e-3), ("void scale(float *, int)", same, 4e-4),
              ("void copy(float *, int)", same, 4e-4)]
    after = [("void reduce_warp_shuffle(const float *, float *, int)", same, 1.2e-3), *before[1:]]
    history = nights([before] * 10 + [after])
    everything = decide_all(history)
    plain = last_night(everything)
    # unmatched, the renamed kernel is a move (not missing and new), and the app's total (1.8 ms ->
    # 2.0 ms) the regression, naming the kernel that carries it
    assert sorted(plain["label"]) == ["moved", "moved", "unchanged", "unchanged"]
    assert set(plain.loc[plain["label"] == "moved", "note"]) == {
        "moved: void reduce_v1(const float *, float *, int) became "
        "void reduce_warp_shuffle(const float *, float *, int), app total +10.0 %"}
    total = app_total(everything)
    assert total["label"] == "regression" and total["note"] == (  # 1.2 ms x 0.99 tonight, 1.005 ms before
        "app total +10.0 %, carried by: void reduce_v1(const float *, float *, int) became "
        "void reduce_warp_shuffle(const float *, float *, int) (+183 µs per night)")
    params = DecisionParams.from_mapping({"rename": {"reduce_warp_shuffle": "reduce_v1"}})
    mapped = last_night(decide_all(history, params)).set_index("kernel")
    assert len(mapped) == 3
    assert mapped.loc[after[0][0], "label"] == "regression"
    assert mapped.loc[after[0][0], "note"] == f"matched by the rename map (was {before[0][0]})"
    with pytest.raises(ValueError, match="not a regular expression"):
        DecisionParams.from_mapping({"rename": {"(": "x"}})


def test_the_real_flashattention_pair_as_two_nights_is_one_kernel():
    """The real pair (fa3_fwd_kernel -> fa3db_full_fwd_kernel, PROVENANCE.md: the same attention
    problem, double-buffered) as two nights of one app: one series, followed by its launch
    configuration; with one night before it the change is information (-29 %), not missing/new."""
    import roofline

    folder = real_fixture("rtx4060ti-flashattn-fp16-tensorroofline-ncu2025.4")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kernels = roofline.analyse([folder / "fa3_before_n4096_full.ncu-rep",
                                    folder / "db_full_after_n4096_full.ncu-rep"]).kernels
    kernels = kernels.assign(run_id=kernels["app"].map({"fa3_before_n4096_full": "2026-03-01",
                                                        "db_full_after_n4096_full": "2026-03-02"}), app="flashattn")
    # the kernels table keeps each kernel's registers and shared memory; the double-buffered rewrite
    # changed both, which is why they only tell apart kernels of one launch configuration
    assert kernels["registers_per_thread"].tolist() == [80, 95]
    assert kernels["shared_mem_bytes"].tolist() == [9216, 18432]
    decisions = decide_all(history_frame(kernels.assign(run_date=kernels["run_id"])))
    assert decisions["label"].tolist() == ["new", "insufficient_data"]
    night = decisions.iloc[1]
    assert night["kernel"].startswith("void fa3db_full_fwd_kernel<") and night["direction"] == "down"
    assert night["note"].startswith("matched by launch configuration: name changed (was void fa3_fwd_kernel<")
    assert night["ratio"] == pytest.approx(0.712, abs=0.001)


def test_registers_and_shared_memory_tell_apart_kernels_of_one_launch_configuration(tmp_path):
    """Hand-made: two kernels of one grid x block, both renamed by a rewrite; their registers per
    thread and shared memory per block (kept in the kernels table, the first launch's) make each
    launch configuration unique, so each is followed (the 10 % slower one a regression). Without
    them, or on nights stored before they were kept, they are not told apart: a move."""
    same = "(108, 1, 1)"
    resources = {"reduce": (32.0, 0.0), "scale": (16.0, 4096.0)}

    def night_rows(version: str, slower: float) -> list[tuple[str, str, float]]:
        return [(f"void reduce_{version}(const float *, float *, int)", same, 1e-3 * slower),
                (f"void scale_{version}(float *, int)", same, 4e-4)]

    history = nights([night_rows("v1", 1.0)] * 10 + [night_rows("v2", 1.1)])
    which = history["kernel"].str.extract(r"void (\w+)_v")[0]
    with_resources = history.assign(registers_per_thread=which.map(lambda k: resources[k][0]),
                                     shared_mem_bytes=which.map(lambda k: resources[k][1]))
    tonight = last_night(decide_all(with_resources)).set_index("kernel")
    assert tonight["label"].tolist() == ["regression", "unchanged"]
    assert tonight["note"].iat[0].startswith("matched by launch configuration: name changed (was void reduce_v1")
    assert tonight["previous_kernel"].tolist() == ["void reduce_v1(const float *, float *, int)",
                                                   "void scale_v1(float *, int)"]
    # the nightly path from the stored state (the resources kept in it) follows them the same way
    store = tmp_path / "history"
    for run_id, night in with_resources.groupby("run_id"):
        append_run(store, run_id, night)
        update(store, DecisionParams(), changed=[run_id])
    assert last_night(read_decisions(store, ["2026-03-11"]))["label"].tolist() == ["regression", "unchanged"]
    # without them (or with them on tonight's side only) one launch configuration is two kernels: a move
    plain = last_night(decide_all(history))
    assert sorted(plain["label"]) == ["moved"] * 4
    tonight_only = with_resources.where(with_resources["run_id"] == "2026-03-11", history)
    assert sorted(last_night(decide_all(tonight_only))["label"]) == ["moved"] * 4
