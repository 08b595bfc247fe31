"""The compute classes and memory levels, and how each tensor-core class shows in ncu's counters.

A compute class is one instruction path with one roof: FP64/FP32/FP16 on the CUDA cores, and on
the tensor cores one datatype and accumulator, dense or 2:4 sparse. :data:`TENSOR_PATHS` lists,
per tensor class and architecture, the ``sm__ops_path_tensor_*`` counters that hold its work and
the one whose peak is its roof; roofline.metrics.quantities turns them into recipes.

Hopper has two tensor instruction paths with two roofs: wgmma (``op_hgmma``/``op_igmma``) and the
legacy mma.sync (``op_hmma``/``op_imma``), whose ``peak_sustained`` is 2/3 of wgmma's dense rate and
1/2 of its 2:4-sparse one (BF16 on H100/H200: 2,730.67 against 4,096 ops per SM per cycle dense,
4,096 against 8,192 sparse). Its work is its own classes, ``tensor_<inputs>_mma`` (:data:`MMA_OF`),
counted on sm_90 only, each with the ``op_hmma``/``op_imma`` peak as its roof; the datasheet gives
no value for them (vendors quote the wgmma rate), so a device without the report's peak has no roof
for them rather than the wgmma one. Separate classes, rather than two paths' work and peaks kept
apart inside one class, because everything downstream is keyed by class: the report's per-device
ceiling is a median per class over every launch (a class whose roof depended on which path a launch
took would mix two rates in it), the chart draws one roof line per class and a point's class names
the line it is judged against, and the catalog, the what-if tables and the schemas take their
columns from the class list. A launch on both paths is judged like any mix of classes
(roofline.classify.launches): each path's work against its own roof, never against the other's. Hopper's
aggregate ``src_*`` counters (both paths' work, one peak) are read only where the per-instruction
split is absent.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.metrics.recipe import Quantity, Recipe

# Compute classes in the order the report lists them. Tensor-core classes are one datatype and
# accumulator on one path: dense, or 2:4 structured sparse (``_sparse``), each with its own roof.
# ``tensor_fp16`` is FP16 inputs with FP16 accumulate, or with either accumulator where the counters
# do not tell them apart (Volta, Hopper wgmma: the same rate there); ``tensor_fp16_acc32`` is FP16
# inputs with FP32 accumulate where the counters separate it (half rate on GeForce and the A10G).
# ``tensor_fp8`` includes Blackwell's combined FP4/FP6/FP8 (kind::f8f6f4) path, and
# ``tensor_fp8_acc32`` its FP32-accumulate half where the counters split it (Blackwell); Ada's and
# Hopper's FP8 counters do not, and go to ``tensor_fp8``. ``tensor_fp4`` is block-scaled FP4 (and
# GeForce Blackwell's FP4/FP6 counters). ``<class>_mma`` is the same inputs on Hopper's mma.sync path
# (module docstring).
CUDA_CORE_CLASSES = ("fp64", "fp32", "fp16")
TENSOR_DENSE_CLASSES = (
    "tensor_fp64",
    "tensor_tf32",
    "tensor_fp16",
    "tensor_fp16_acc32",
    "tensor_bf16",
    "tensor_fp8",
    "tensor_fp8_acc32",
    "tensor_fp4",
    "tensor_int8",
)
# The FP32-accumulate classes, and the class of the same inputs whose datasheet entry gives them
# (``fp32_accumulate``, or ``value`` where the part runs both at one rate).
ACC32_OF = {"tensor_fp16_acc32": "tensor_fp16", "tensor_fp8_acc32": "tensor_fp8"}
# Hopper's mma.sync classes -> the class of the same inputs on the wgmma path; listed after the
# others (the report's and the charts' order of the classes before them stays).
MMA_OF = {f"{c}_mma": c for c in ("tensor_fp16", "tensor_fp16_acc32", "tensor_bf16", "tensor_tf32", "tensor_int8")}
_SPARSE_MAIN = {f"{c}_sparse": c for c in TENSOR_DENSE_CLASSES if c != "tensor_fp64"}
_SPARSE_MMA = {f"{c}_sparse": c for c in MMA_OF}
# sparse class -> its dense class
SPARSE_OF: dict[str, str] = {**_SPARSE_MAIN, **_SPARSE_MMA}
TENSOR_CLASSES = TENSOR_DENSE_CLASSES + tuple(_SPARSE_MAIN) + tuple(MMA_OF) + tuple(_SPARSE_MMA)
COMPUTE_CLASSES = CUDA_CORE_CLASSES + TENSOR_CLASSES
# The classes a datasheet entry names; the FP32-accumulate and sparse classes are derived from an
# entry's ``fp32_accumulate`` and ``sparse`` values (roofline/ceilings/catalog_entries.py).
CATALOG_CLASSES = CUDA_CORE_CLASSES + tuple(c for c in TENSOR_DENSE_CLASSES if c not in ACC32_OF)
MEMORY_LEVELS = ("dram", "l2", "l1", "shared")


@dataclass(frozen=True)
class TensorPath:
    """One way a tensor class shows in ncu's counters on a range of architectures.

    ``work`` lists the ``sm__ops_path_tensor_<variant>`` counters summed for the class's work (one
    op is one FLOP: the RTX 5060 WMMA fixture's ops equal 2·M·N·K exactly); ``peak`` is the variant
    whose ``.sum.peak_sustained`` (per cycle) times the SM clock is the class's roof, times
    ``peak_coef`` (Hopper's and GeForce Blackwell's aggregate counters peak at the 2:4-sparse rate:
    their dense roof is half of it).
    """

    name: str
    work: tuple[str, ...]
    peak: str
    cc_min: int
    cc_max: int
    peak_coef: float = 1.0
    note: str = ""


def _tensor_paths() -> dict[str, tuple[TensorPath, ...]]:
    """Class -> paths in order of preference, from the ncu 2025-2026 section files and the fixtures
    (../shared/guides/roofline.md §2.4): per-instruction splits first, aggregates as the fallback."""
    paths: dict[str, list[TensorPath]] = {c: [] for c in TENSOR_CLASSES}
    aggregate = "aggregate counter: dense and 2:4-sparse work not separated; roof = half its (sparse) peak"
    for s, suffix in (("off", ""), ("on", "_sparse")):

        def add(cls: str, *path: TensorPath, suffix: str = suffix) -> None:
            paths[cls + suffix].extend(path)

        sp = f"sparsity_{s}"
        # Blackwell data-center (sm_100-119): tcgen05 (op_utc*) beside mma.sync (op_hmma/op_imma)
        add(
            "tensor_fp16",
            TensorPath(
                "blackwell_utc",
                (f"op_utchmma_src_fp16_dst_fp16_{sp}", f"op_hmma_src_fp16_dst_fp16_{sp}"),
                f"op_utchmma_src_fp16_dst_fp16_{sp}",
                100,
                119,
            ),
        )
        add(
            "tensor_fp16_acc32",
            TensorPath(
                "blackwell_utc",
                (f"op_utchmma_src_fp16_dst_fp32_{sp}", f"op_hmma_src_fp16_dst_fp32_{sp}"),
                f"op_utchmma_src_fp16_dst_fp32_{sp}",
                100,
                119,
            ),
        )
        add(
            "tensor_bf16",
            TensorPath(
                "blackwell_utc",
                (f"op_utchmma_src_bf16_dst_fp32_{sp}", f"op_hmma_src_bf16_dst_fp32_{sp}"),
                f"op_utchmma_src_bf16_dst_fp32_{sp}",
                100,
                119,
            ),
        )
        add(
            "tensor_tf32",
            TensorPath(
                "blackwell_utc",
                (f"op_utchmma_src_tf32_dst_fp32_{sp}", f"op_hmma_src_tf32_dst_fp32_{sp}"),
                f"op_utchmma_src_tf32_dst_fp32_{sp}",
                100,
                119,
            ),
        )
        for acc, acc_cls in (("fp16", "tensor_fp8"), ("fp32", "tensor_fp8_acc32")):
            utcq, f8f6f4 = f"op_utcqmma_src_fp4_fp6_fp8_dst_{acc}_{sp}", f"src_fp4_fp6_fp8_dst_{acc}_{sp}"
            add(
                acc_cls,
                TensorPath("blackwell_utc", (utcq,), utcq, 100, 119),
                TensorPath("blackwell_f8f6f4", (f8f6f4,), f8f6f4, 100, 119),
            )
        add(
            "tensor_fp4",
            TensorPath(
                "blackwell_utc", (f"op_utcomma_src_fp4_dst_fp32_{sp}",), f"op_utcomma_src_fp4_dst_fp32_{sp}", 100, 119
            ),
        )
        add(
            "tensor_int8",
            TensorPath(
                "blackwell_utc",
                (f"op_utcimma_src_int8_{sp}", f"op_imma_src_int8_{sp}"),
                f"op_utcimma_src_int8_{sp}",
                100,
                119,
            ),
        )
        # GeForce Blackwell (sm_120-129): mma.sync splits; aggregates without the sparsity split
        add(
            "tensor_fp16",
            TensorPath(
                "geforce_blackwell_hmma",
                (f"op_hmma_src_fp16_dst_fp16_{sp}",),
                f"op_hmma_src_fp16_dst_fp16_{sp}",
                120,
                129,
            ),
        )
        add(
            "tensor_fp16_acc32",
            TensorPath(
                "geforce_blackwell_hmma",
                (f"op_hmma_src_fp16_dst_fp32_{sp}",),
                f"op_hmma_src_fp16_dst_fp32_{sp}",
                120,
                129,
            ),
        )
        add(
            "tensor_bf16",
            TensorPath(
                "geforce_blackwell_hmma",
                (f"op_hmma_src_bf16_dst_fp32_{sp}",),
                f"op_hmma_src_bf16_dst_fp32_{sp}",
                120,
                129,
            ),
        )
        add(
            "tensor_tf32",
            TensorPath(
                "geforce_blackwell_hmma",
                (f"op_hmma_src_tf32_dst_fp32_{sp}",),
                f"op_hmma_src_tf32_dst_fp32_{sp}",
                120,
                129,
            ),
        )
        add(
            "tensor_int8",
            TensorPath("geforce_blackwell_imma", (f"op_imma_src_int8_{sp}",), f"op_imma_src_int8_{sp}", 120, 129),
        )
        for acc, acc_cls in (("fp16", "tensor_fp8"), ("fp32", "tensor_fp8_acc32")):
            variant = f"src_fp8_dst_{acc}_{sp}"
            add(acc_cls, TensorPath("geforce_blackwell", (variant,), variant, 120, 129))
        add(
            "tensor_fp4",
            TensorPath(
                "geforce_blackwell",
                (f"src_fp4_dst_fp32_{sp}", f"src_fp4_fp6_dst_fp16_{sp}", f"src_fp4_fp6_dst_fp32_{sp}"),
                f"src_fp4_dst_fp32_{sp}",
                120,
                129,
            ),
        )
        # Hopper (sm_90-99): wgmma (op_hgmma/op_igmma) and mma.sync (op_hmma/op_imma) are two paths
        # with two roofs, so two sets of classes; wgmma does not split the FP16 accumulators.
        for cls, variant in (
            ("tensor_fp16", f"op_hgmma_src_fp16_{sp}"),
            ("tensor_bf16", f"op_hgmma_src_bf16_dst_fp32_{sp}"),
            ("tensor_tf32", f"op_hgmma_src_tf32_dst_fp32_{sp}"),
            ("tensor_int8", f"op_igmma_src_int8_{sp}"),
        ):
            add(cls, TensorPath("hopper_gmma", (variant,), variant, 90, 99))
        for cls, variant in (
            ("tensor_fp16_mma", f"op_hmma_src_fp16_dst_fp16_{sp}"),
            ("tensor_fp16_acc32_mma", f"op_hmma_src_fp16_dst_fp32_{sp}"),
            ("tensor_bf16_mma", f"op_hmma_src_bf16_dst_fp32_{sp}"),
            ("tensor_tf32_mma", f"op_hmma_src_tf32_dst_fp32_{sp}"),
            ("tensor_int8_mma", f"op_imma_src_int8_{sp}"),
        ):
            add(cls, TensorPath("hopper_mma_sync", (variant,), variant, 90, 99))
        add("tensor_fp8", TensorPath("hopper", (f"src_fp8_{sp}",), f"src_fp8_{sp}", 90, 99))
        # Ampere and Ada (sm_80-89): per-accumulator, per-sparsity counters
        add("tensor_fp16", TensorPath("ampere", (f"src_fp16_dst_fp16_{sp}",), f"src_fp16_dst_fp16_{sp}", 80, 89))
        add("tensor_fp16_acc32", TensorPath("ampere", (f"src_fp16_dst_fp32_{sp}",), f"src_fp16_dst_fp32_{sp}", 80, 89))
        add("tensor_bf16", TensorPath("ampere", (f"src_bf16_dst_fp32_{sp}",), f"src_bf16_dst_fp32_{sp}", 80, 89))
        add("tensor_tf32", TensorPath("ampere", (f"src_tf32_dst_fp32_{sp}",), f"src_tf32_dst_fp32_{sp}", 80, 89))
        add("tensor_int8", TensorPath("ampere", (f"src_int8_{sp}",), f"src_int8_{sp}", 80, 89))
        add("tensor_fp8", TensorPath("ada", (f"src_fp8_{sp}",), f"src_fp8_{sp}", 89, 89))
    # Dense-only paths: FP64 DMMA; Turing's combined counters; the aggregates of Hopper and GeForce
    # Blackwell where the per-instruction splits are absent (the sparse rate halved). Hopper's hold
    # both paths' work at the wgmma roof: without the split, mma.sync work cannot be told apart.
    paths["tensor_fp64"].append(TensorPath("fp64", ("src_fp64",), "src_fp64", 80, 999))
    for cls, variant in (
        ("tensor_fp16", "src_fp16"),
        ("tensor_bf16", "src_bf16_dst_fp32"),
        ("tensor_tf32", "src_tf32_dst_fp32"),
        ("tensor_int8", "src_int8"),
    ):
        paths[cls].append(TensorPath("hopper_aggregate", (variant,), variant, 90, 99, 0.5, aggregate))
    for cls, variant in (
        ("tensor_fp16", "src_fp16_dst_fp16"),
        ("tensor_fp16_acc32", "src_fp16_dst_fp32"),
        ("tensor_bf16", "src_bf16_dst_fp32"),
        ("tensor_tf32", "src_tf32_dst_fp32"),
        ("tensor_int8", "src_int8"),
    ):
        paths[cls].append(TensorPath("blackwell_aggregate", (variant,), variant, 100, 129, 0.5, aggregate))
    paths["tensor_fp16"].append(TensorPath("turing", ("src_fp16_dst_fp16",), "src_fp16_dst_fp16", 75, 75))
    paths["tensor_fp16_acc32"].append(
        TensorPath("turing", ("src_fp16_bf16_tf32_dst_fp32",), "src_fp16_bf16_tf32_dst_fp32", 75, 75)
    )
    paths["tensor_int8"].append(TensorPath("turing", ("src_int8",), "src_int8", 75, 75))
    return {cls: tuple(p) for cls, p in paths.items()}


TENSOR_PATHS: dict[str, tuple[TensorPath, ...]] = _tensor_paths()


def _tensor_description(cls: str) -> str:
    base = SPARSE_OF.get(cls, cls)
    kind = "2:4 structured sparse" if cls in SPARSE_OF else "dense"
    inputs = {
        "tensor_fp16_acc32": "FP16 inputs, FP32 accumulate",
        "tensor_fp16": "FP16 inputs, FP16 accumulate",
        "tensor_fp8": "FP8 inputs (Blackwell: FP4/FP6/FP8)",
        "tensor_fp4": "FP4 inputs",
        "tensor_fp8_acc32": "FP8 inputs (Blackwell: FP4/FP6/FP8), FP32 accumulate",
    }
    if base in MMA_OF:
        wgmma_class = MMA_OF[base] + ("_sparse" if cls in SPARSE_OF else "")
        return f"{_tensor_description(wgmma_class)}, mma.sync (Hopper HMMA/IMMA)"
    return f"{inputs.get(base, base.removeprefix('tensor_').upper() + ' inputs')}, {kind}"


TENSOR_DESCRIPTIONS = {cls: _tensor_description(cls) for cls in TENSOR_CLASSES}


# NERSC's V100 constant: FLOP per tensor-pipe warp instruction (sm_70, no tensor op counters)
VOLTA_TENSOR_FLOP_PER_INST = 512.0


def _ops(variant: str, suffix: str) -> str:
    return f"sm__ops_path_tensor_{variant}.sum{suffix}"


def tensor_quantities(cls: str) -> tuple[Quantity, Quantity]:
    """The work and roof quantities of tensor class ``cls``: one pair of recipes per path."""
    work, peak = [], []
    for path in TENSOR_PATHS[cls]:
        arch = {"cc_min": path.cc_min, "cc_max": path.cc_max}
        work.append(Recipe(f"{path.name}_count", tuple((1.0, _ops(v, "")) for v in path.work), note=path.note, **arch))
        work.append(
            Recipe(
                f"{path.name}_rate_x_sm_cycles",
                tuple((1.0, _ops(v, ".per_cycle_elapsed")) for v in path.work),
                scale=("@sm_cycles",),
                note="sm__ops_path_tensor_* per-cycle rates x SM elapsed cycles"
                + (f"; {path.note}" if path.note else ""),
                **arch,
            )
        )
        if not any(r.name == f"{path.name}_peak_x_sm_clock" for r in peak):
            peak.append(
                Recipe(
                    f"{path.name}_peak_x_sm_clock",
                    ((path.peak_coef, _ops(path.peak, ".peak_sustained")),),
                    scale=("@sm_clock_hz",),
                    note=path.note,
                    **arch,
                )
            )
    if cls == "tensor_fp16":
        work.append(
            Recipe(
                "volta_pipe_tensor_x512",
                ((VOLTA_TENSOR_FLOP_PER_INST, "sm__inst_executed_pipe_tensor.sum"),),
                note="NERSC's V100 constant: 512 FLOP per tensor-pipe warp instruction (sm_70 only)",
                cc_min=70,
                cc_max=72,
            )
        )
        work.append(
            Recipe(
                "volta_pipe_tensor_rate_x512",
                ((VOLTA_TENSOR_FLOP_PER_INST, "smsp__inst_executed_pipe_tensor.sum.per_cycle_elapsed"),),
                scale=("@smsp_cycles",),
                cc_min=70,
                cc_max=72,
            )
        )
    what = TENSOR_DESCRIPTIONS[cls]
    return (
        Quantity(f"flop_{cls}", "FLOP", tuple(work), f"tensor-core ops (1 op = 1 FLOP), {what}"),
        Quantity(f"peak_flops_{cls}", "FLOP/s", tuple(peak), f"per-launch peak of tensor-core ops, {what}"),
    )
