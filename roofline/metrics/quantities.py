"""The one table of ncu metric recipes, shared by capture (what to collect) and parse (how to derive).

Every canonical quantity of a kernel launch (duration, clocks, FLOPs per precision, tensor ops per
datatype, bytes per memory level, per-launch peak rates) has one or more *recipes*, in order of
preference. A recipe is a sum of ncu metrics times coefficients, optionally scaled by other
quantities, e.g. FP32 FLOP = (fadd + fmul + 2 ffma rates) x SMSP elapsed cycles. Parse takes, per
launch, the first recipe whose inputs are all present and finite, and records its name next to the
value (column ``<quantity>_recipe``). Capture asks ncu for the metrics of the first recipe of every
quantity. docs/metrics.md explains the table in prose.

Conventions (docs/metrics.md "Counting conventions"; ../shared/guides/roofline.md §4-6), one per
compute path, applied to work and roof alike whichever source gives the roof (version ``CONVENTION``):
- an FMA counts 2 FLOP (FP64, FP32; Blackwell's FFMA2 counts 4);
- FP16 on CUDA cores counts every H instruction as a half2 pair, as the vendors' peaks and ncu's
  2025 sections do: 2 HADD + 2 HMUL + 4 HFMA, roof 4 x the HFMA peak. A scalar ``__hfma`` is
  over-counted 2x by this (ncu's counters do not separate it);
- one tensor-core op is one FLOP; tensor work and roof come from the same counter variant, per
  datatype, accumulator (where the counters split it) and sparsity (dense and 2:4 sparse are
  separate classes; a sparse rate is never the roof of dense work); Volta as 512 x tensor-pipe
  instructions (NERSC);
- a memory level's bytes and its roof come from one counter family (:data:`LEVEL_PAIRS`): L2 the
  L2 tag traffic (``lts__t_bytes``, or 32 B ``lts__t_sectors``) with that counter's own peak, else
  ncu 2025's L2-to-crossbar path (``lts2xbar``, 32 B per active cycle) with its peak; L1 the L1TEX
  tag traffic (``l1tex__t_bytes``) where reported, else the LSU writeback path (128 B per active
  cycle, ncu 2025 sections), each with its own peak.
"""

from __future__ import annotations

from roofline.metrics.compute_paths import (  # noqa: F401 - re-exported: the classes are this table's vocabulary
    ACC32_OF,
    CATALOG_CLASSES,
    COMPUTE_CLASSES,
    CUDA_CORE_CLASSES,
    MEMORY_LEVELS,
    MMA_OF,
    SPARSE_OF,
    TENSOR_CLASSES,
    TENSOR_DENSE_CLASSES,
    TENSOR_DESCRIPTIONS,
    TENSOR_PATHS,
    tensor_quantities,
)
from roofline.metrics.recipe import Quantity, Recipe
from roofline.metrics.sass_recipes import flop_recipes, peak_flop_recipe

# The counting conventions of every derived number, stored with it (column ``convention``) and in
# the history store: a change of convention starts a new tracking segment instead of a regression.
# Bump it whenever a recipe changes what a quantity counts (docs/metrics.md, "Conventions").
CONVENTION = "2026.12b"

SECTOR_BYTES = 32.0
L1_WRITEBACK_BYTES_PER_CYCLE = 128.0
L2_SLICES = "device__attribute_l2s_count"  # L2 (LTS) slices: the unit instances of lts__ counters
# L1TEX units: SMs x L1TEX per SM, the unit instances of l1tex__ counters
L1TEX_UNITS = ("device__attribute_multiprocessor_count", "device__attribute_num_tex_per_multiprocessor")
# The LSU writeback families, newest first (family, ncu counter, compute capabilities): _mem_lgds on
# sm_90+ (with distributed shared memory), _mem_lg on sm_75-89, the plain counter up to sm_72 (the
# architecture filters of ncu's 2025 sections).
L1_WRITEBACK_FAMILIES = (
    ("lsu_writeback_lgds", "l1tex__lsu_writeback_active_mem_lgds", 90, None),
    ("lsu_writeback_lg", "l1tex__lsu_writeback_active_mem_lg", 75, 89),
    ("lsu_writeback", "l1tex__lsu_writeback_active", None, 72),
)
SMSP_PER_SM = 4.0
# The compiler's HFMA2.MMA register moves, which ncu's hfma counter includes: thread instructions of
# that opcode from the per-opcode SASS counts of full-set reports (SourceCounters section), read by
# the .ncu-rep reader under this name (the metric's instance for that opcode).
HFMA2_MMA_METRIC = "sass__thread_inst_executed_true_per_opcode_with_modifier_all[HFMA2.MMA]"
# Warp instructions of the tensor cores' matrix opcodes (HMMA, IMMA, DMMA, BMMA, HGMMA, QGMMA,
# UTCHMMA, ...; not HFMA2.MMA, whose opcode is HFMA2) from the per-opcode SASS counts of full-set
# reports, read by the .ncu-rep reader under this name (the sum of those opcodes' instances).
MMA_INSTRUCTIONS_METRIC = "sass__inst_executed_per_opcode[*MMA]"


QUANTITIES: tuple[Quantity, ...] = (
    # -- time and clocks (needed by rate recipes, so they come first) --
    Quantity(
        "duration_s",
        "s",
        (
            Recipe("gpu_time_duration", ((1.0, "gpu__time_duration.sum"),)),
            Recipe(
                "sm_cycles_over_clock",
                ((1.0, "sm__cycles_elapsed.avg"),),
                divide=("sm__cycles_elapsed.avg.per_second",),
                note="NERSC: elapsed SM cycles / SM clock",
            ),
        ),
        "kernel duration",
    ),
    Quantity(
        "sm_clock_hz",
        "Hz",
        (Recipe("sm_cycles_per_second", ((1.0, "sm__cycles_elapsed.avg.per_second"),)),),
        "SM clock measured during the launch",
    ),
    Quantity(
        "smsp_cycles",
        "cycle",
        (
            Recipe("smsp_cycles_avg", ((1.0, "smsp__cycles_elapsed.avg"),)),
            Recipe(
                "smsp_cycles_sum_over_smsp_count",
                ((1.0 / SMSP_PER_SM, "smsp__cycles_elapsed.sum"),),
                divide=("device__attribute_multiprocessor_count",),
                note="ncu 2021-2023 reports lack the .avg: sum / (4 x SM count)",
            ),
            Recipe(
                "smsp_clock_x_duration",
                ((1.0, "smsp__cycles_elapsed.avg.per_second"),),
                scale=("@duration_s",),
            ),
        ),
        "elapsed cycles per SM sub-partition",
    ),
    Quantity(
        "sm_cycles",
        "cycle",
        (
            Recipe("sm_cycles_avg", ((1.0, "sm__cycles_elapsed.avg"),)),
            Recipe(
                "sm_cycles_sum_over_sm_count",
                ((1.0, "sm__cycles_elapsed.sum"),),
                divide=("device__attribute_multiprocessor_count",),
            ),
            Recipe("sm_clock_x_duration", ((1.0, "sm__cycles_elapsed.avg.per_second"),), scale=("@duration_s",)),
        ),
        "elapsed cycles per SM",
    ),
    Quantity(
        "dram_clock_hz", "Hz", (Recipe("dram_cycles_per_second", ((1.0, "dram__cycles_elapsed.avg.per_second"),)),)
    ),
    Quantity(
        "l2_clock_hz",
        "Hz",
        (
            Recipe("lts_cycles_per_second", ((1.0, "lts__cycles_elapsed.avg.per_second"),)),
            Recipe("lts_cycles_over_duration", ((1.0, "lts__cycles_elapsed.avg"),), divide=("@duration_s",)),
            Recipe(
                "lts_cycles_sum_over_slices_over_duration",
                ((1.0, "lts__cycles_elapsed.sum"),),
                divide=(L2_SLICES, "@duration_s"),
                note="ncu 2023 reports: elapsed cycles of all L2 slices / slices / duration",
            ),
            Recipe(
                "lts_sector_rate_over_sectors_per_cycle",
                ((1.0, "lts__t_sectors.sum.per_second"),),
                divide=("lts__t_sectors.avg.per_cycle_elapsed", L2_SLICES),
                note="ncu 2021-2023 reports without L2 cycles: (sectors/s) / (sectors per slice-cycle) / slices; "
                "none for a launch without L2 traffic",
            ),
        ),
        "L2 (LTS) clock measured during the launch",
    ),
    Quantity(
        "l1_clock_hz",
        "Hz",
        (
            Recipe("l1tex_cycles_per_second", ((1.0, "l1tex__cycles_elapsed.avg.per_second"),)),
            Recipe(
                "l1tex_cycles_sum_over_units_over_duration",
                ((1.0, "l1tex__cycles_elapsed.sum"),),
                divide=(*L1TEX_UNITS, "@duration_s"),
                note="ncu 2023 reports: elapsed cycles of all L1TEX units / units / duration",
            ),
            Recipe(
                "sm_cycles_per_second", ((1.0, "sm__cycles_elapsed.avg.per_second"),), note="L1TEX runs at the SM clock"
            ),
        ),
    ),
    # -- work --
    Quantity("flop_fp64", "FLOP", flop_recipes("d"), "FP64 FLOP on CUDA cores"),
    Quantity("flop_fp32", "FLOP", flop_recipes("f", packed=True), "FP32 FLOP on CUDA cores"),
    Quantity(
        "flop_fp16",
        "FLOP",
        flop_recipes("h", fma_weight=4.0, add_weight=2.0),
        "FP16 FLOP on CUDA cores, half2 convention (every H instruction two lanes)",
    ),
    *(tensor_quantities(cls)[0] for cls in TENSOR_CLASSES),
    Quantity(
        "flop_fp16_register_moves",
        "FLOP",
        (
            Recipe(
                "sass_per_opcode_hfma2_mma",
                ((4.0, HFMA2_MMA_METRIC),),
                note="4 x HFMA2.MMA thread instructions (per-opcode SASS counts): counted in flop_fp16, not FP16 work",
            ),
        ),
        "the part of flop_fp16 that is HFMA2.MMA register moves, where per-opcode counts tell",
        capture=False,
    ),
    Quantity(
        "tensor_pipe_active_pct",
        "%",
        (
            Recipe(
                "pipe_tensor_cycles_active", ((1.0, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"),)
            ),
            Recipe(
                "pipe_tensor_cycles_active_v2",
                ((1.0, "sm__pipe_tensor_cycles_active_v2.avg.pct_of_peak_sustained_elapsed"),),
            ),
            Recipe(
                "pipe_tensor_hmma_plus_imma_issue",
                (
                    (1.0, "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active"),
                    (1.0, "sm__inst_executed_pipe_tensor_op_imma.avg.pct_of_peak_sustained_active"),
                ),
            ),
        ),
        "tensor pipe busy, % of peak: tells tensor work the op counters do not show",
    ),
    Quantity(
        "tensor_instructions",
        "inst",
        (
            Recipe(
                "sass_per_opcode_mma",
                ((1.0, MMA_INSTRUCTIONS_METRIC),),
                note="warp instructions of the MMA opcodes in the per-opcode SASS counts (HFMA2.MMA moves excluded)",
            ),
            Recipe("pipe_tensor_inst", ((1.0, "sm__inst_executed_pipe_tensor.sum"),)),
            Recipe(
                "pipe_tensor_inst_rate",
                ((1.0, "smsp__inst_executed_pipe_tensor.sum.per_cycle_elapsed"),),
                scale=("@smsp_cycles",),
            ),
        ),
        "tensor-core warp instructions: evidence of tensor work, whether or not the op counters show it",
        capture=False,
    ),
    Quantity(
        "warp_instructions",
        "inst",
        (Recipe("smsp_inst_executed", ((1.0, "smsp__inst_executed.sum"),)),),
        "executed warp instructions (instruction roofline)",
    ),
    # -- traffic --
    Quantity(
        "dram_bytes",
        "B",
        (
            Recipe("dram_bytes", ((1.0, "dram__bytes.sum"),)),
            Recipe("dram_read_plus_write", ((1.0, "dram__bytes_read.sum"), (1.0, "dram__bytes_write.sum"))),
            Recipe(
                "dram_op_read_plus_write",
                ((1.0, "dram__bytes_op_read.sum"), (1.0, "dram__bytes_op_write.sum")),
                note="the names of ncu 2025.4 and later",
            ),
            Recipe("dram_rate_x_duration", ((1.0, "dram__bytes.sum.per_second"),), scale=("@duration_s",)),
        ),
        "DRAM/HBM bytes read and written",
    ),
    Quantity(
        "l2_bytes",
        "B",
        (
            Recipe("lts_t_bytes", ((1.0, "lts__t_bytes.sum"),), family="lts_t_bytes"),
            Recipe("lts_t_sectors_x32", ((SECTOR_BYTES, "lts__t_sectors.sum"),), family="lts_t_sectors"),
            Recipe(
                "lts_t_bytes_rate_x_duration",
                ((1.0, "lts__t_bytes.sum.per_second"),),
                scale=("@duration_s",),
                family="lts_t_bytes",
            ),
            Recipe(
                "lts_t_sectors_rate_x_duration",
                ((SECTOR_BYTES, "lts__t_sectors.sum.per_second"),),
                scale=("@duration_s",),
                family="lts_t_sectors",
            ),
            Recipe(
                "lts2xbar_x32", ((SECTOR_BYTES, "lts__lts2xbar_cycles_active.sum"),), family="lts2xbar"
            ),
            Recipe(
                "lts2xbar_bytes_rate_x_duration",
                ((1.0, "derived__lts__lts2xbar_bytes.sum.per_second"),),
                scale=("@duration_s",),
                family="lts2xbar",
            ),
            Recipe(
                "lts2xbar_rate_x32_x_duration",
                ((SECTOR_BYTES, "lts__lts2xbar_cycles_active.sum.per_second"),),
                scale=("@duration_s",),
                family="lts2xbar",
            ),
        ),
        "L2 bytes: LTS tag traffic, else the L2-to-crossbar path (peak_l2_bw from the same family)",
    ),
    Quantity(
        "l1_bytes",
        "B",
        (
            Recipe("l1tex_t_bytes", ((1.0, "l1tex__t_bytes.sum"),), family="l1tex_t_bytes"),
            *(
                Recipe(f"{family}_x128", ((L1_WRITEBACK_BYTES_PER_CYCLE, f"{metric}.sum"),), family=family)
                for family, metric, _, _ in L1_WRITEBACK_FAMILIES
            ),
        ),
        "L1/TEX bytes: L1TEX tag traffic, else the LSU writeback path (peak_l1_bw from the same family)",
    ),
    Quantity(
        "shared_bytes",
        "B",
        (Recipe("sass_shared_bytes", ((1.0, "sm__sass_data_bytes_mem_shared.sum"),)),),
        "shared-memory bytes",
        capture=False,
    ),
    # -- per-launch peaks (ceilings stage aggregates these robustly per device) --
    Quantity("peak_flops_fp64", "FLOP/s", peak_flop_recipe("dfma", 2.0)),
    Quantity("peak_flops_fp32", "FLOP/s", peak_flop_recipe("ffma", 2.0)),
    Quantity("peak_flops_fp16", "FLOP/s", peak_flop_recipe("hfma", 4.0)),
    *(tensor_quantities(cls)[1] for cls in TENSOR_CLASSES),
    Quantity(
        "peak_dram_bw",
        "B/s",
        (
            Recipe(
                "dram_peak_x_dram_clock",
                ((1.0, "dram__bytes.sum.peak_sustained"),),
                scale=("@dram_clock_hz",),
            ),
        ),
    ),
    Quantity(
        "peak_l2_bw",
        "B/s",
        (
            Recipe(
                "lts_t_bytes_peak_x_lts_clock",
                ((1.0, "lts__t_bytes.sum.peak_sustained"),),
                scale=("@l2_clock_hz",),
                family="lts_t_bytes",
            ),
            Recipe(
                "lts_t_sectors_peak_x32_x_lts_clock",
                ((SECTOR_BYTES, "lts__t_sectors.sum.peak_sustained"),),
                scale=("@l2_clock_hz",),
                family="lts_t_sectors",
            ),
            # --set full reports carry the per-slice peak (.avg), not the .sum one: x the slices the
            # counters count (.sum / .avg of the L2 cycles; the device attribute can count slices
            # the counters do not, 96 vs 94 on the H200), x the L2 clock
            Recipe(
                "lts_t_sectors_slice_peak_x32_x_slices_x_lts_clock",
                ((SECTOR_BYTES, "lts__t_sectors.avg.peak_sustained"),),
                scale=("lts__cycles_elapsed.sum", "@l2_clock_hz"),
                divide=("lts__cycles_elapsed.avg",),
                family="lts_t_sectors",
            ),
            Recipe(
                "lts_t_sectors_slice_peak_x32_x_l2s_count_x_lts_clock",
                ((SECTOR_BYTES, "lts__t_sectors.avg.peak_sustained"),),
                scale=(L2_SLICES, "@l2_clock_hz"),
                family="lts_t_sectors",
                note="reports without L2 cycle counts, whose L2 clock is per slice of the same count",
            ),
            Recipe(
                "lts2xbar_peak_x_lts_clock",
                ((1.0, "derived__lts__lts2xbar_bytes.sum.peak_sustained"),),
                scale=("@l2_clock_hz",),
                family="lts2xbar",
                note="ncu 2025 L2 roof: 32 B per L2-to-crossbar active cycle",
            ),
            Recipe(
                "lts2xbar_cycles_peak_x32_x_lts_clock",
                ((SECTOR_BYTES, "lts__lts2xbar_cycles_active.sum.peak_sustained"),),
                scale=("@l2_clock_hz",),
                family="lts2xbar",
            ),
        ),
        "L2 roof: the peak of the counter family l2_bytes came from, x the L2 clock",
    ),
    Quantity(
        "peak_l1_bw",
        "B/s",
        (
            Recipe(
                "l1tex_t_bytes_peak_x_l1_clock",
                ((1.0, "l1tex__t_bytes.sum.peak_sustained"),),
                scale=("@l1_clock_hz",),
                family="l1tex_t_bytes",
            ),
            *(
                recipe
                for family, metric, cc_min, cc_max in L1_WRITEBACK_FAMILIES
                for recipe in (
                    Recipe(
                        f"{family}_peak_x128",
                        ((L1_WRITEBACK_BYTES_PER_CYCLE, f"{metric}.sum.peak_sustained"),),
                        scale=("@l1_clock_hz",),
                        family=family,
                    ),
                    Recipe(
                        f"{family}_one_per_cycle_x128",
                        ((L1_WRITEBACK_BYTES_PER_CYCLE, L1TEX_UNITS[0]),),
                        scale=(*L1TEX_UNITS[1:], "@l1_clock_hz"),
                        family=family,
                        cc_min=cc_min,
                        cc_max=cc_max,
                        note="a cycles-active counter counts at most one per cycle and unit; reports before "
                        "ncu 2024 omit the peak",
                    ),
                )
            ),
        ),
        "L1 roof: the peak of the counter family l1_bytes came from, x the L1TEX clock",
    ),
    Quantity(
        "peak_shared_bw",
        "B/s",
        (
            Recipe(
                "sass_shared_bytes_peak_x_sm_clock",
                ((1.0, "sm__sass_data_bytes_mem_shared.sum.peak_sustained"),),
                scale=("@sm_clock_hz",),
            ),
        ),
        capture=False,
    ),
)

QUANTITY_BY_NAME: dict[str, Quantity] = {q.name: q for q in QUANTITIES}

# Per memory level with several counter families, its traffic quantity and its peak quantity: a
# launch's bytes and roof at the level come from recipes of one family (``Recipe.family``), the
# first family, in the traffic recipes' order, that gives both; a launch with none gets bytes but
# no roof at that level (the parse diagnostics say why, with level_hint's flags).
LEVEL_PAIRS: dict[str, tuple[str, str]] = {"l2": ("l2_bytes", "peak_l2_bw"), "l1": ("l1_bytes", "peak_l1_bw")}


def level_families(level: str) -> tuple[str, ...]:
    """The counter families of a :data:`LEVEL_PAIRS` level, in order of preference."""
    traffic, _ = LEVEL_PAIRS[level]
    return tuple(dict.fromkeys(r.family for r in QUANTITY_BY_NAME[traffic].recipes))


def level_hint(*levels: str) -> str:
    """The ncu flags that give the levels' traffic and roof, each in one family: the full set, or
    the metrics of each level's first family's first traffic and peak recipes (what capture asks for)."""
    names: dict[str, None] = {}
    for level in levels:
        traffic, peak = (QUANTITY_BY_NAME[q] for q in LEVEL_PAIRS[level])
        family = level_families(level)[0]
        recipes = [next(r for r in q.recipes if r.family == family) for q in (traffic, peak)]
        recipes += [QUANTITY_BY_NAME[d].recipes[0] for r in recipes for d in r.depends_on() if d != "duration_s"]
        names.update(dict.fromkeys(n for r in recipes for n in r.inputs()))
    return f"--set full (or --metrics {','.join(names)})"


# Launch configuration read into grid/block/stream columns; capture asks for them explicitly.
LAUNCH_METRICS = (
    *(f"launch__grid_dim_{axis}" for axis in "xyz"),
    *(f"launch__block_dim_{axis}" for axis in "xyz"),
    "launch__stream_id",
)

# Identity metrics read as they are (strings or numbers), not through recipes.
IDENTITY_METRICS: dict[str, str] = {
    "device": "device__attribute_display_name",
    "cc_major": "device__attribute_compute_capability_major",
    "cc_minor": "device__attribute_compute_capability_minor",
    "sm_count": "device__attribute_multiprocessor_count",
    "grid_size": "launch__grid_size",
    "block_size": "launch__block_size",
    "registers_per_thread": "launch__registers_per_thread",
    "shared_mem_static_bytes": "launch__shared_mem_per_block_static",
    "shared_mem_dynamic_bytes": "launch__shared_mem_per_block_dynamic",
}

# What the roofline cannot do without, and the ncu flags that supply it (printed in errors).
NCU_ROOFLINE_FLAGS = (
    "--set roofline (or --section SpeedOfLight_RooflineChart "
    "--section SpeedOfLight_HierarchicalSingleRooflineChart "
    "--section SpeedOfLight_HierarchicalDoubleRooflineChart)"
)


def all_input_metrics() -> tuple[str, ...]:
    """Every ncu metric any recipe or identity field reads, without duplicates, in table order."""
    seen: dict[str, None] = {}
    for quantity in QUANTITIES:
        for recipe in quantity.recipes:
            for name in recipe.inputs():
                seen.setdefault(name, None)
    for name in (*IDENTITY_METRICS.values(), *LAUNCH_METRICS):
        seen.setdefault(name, None)
    return tuple(seen)


def metric_hint(quantity: str) -> str:
    """The exact ncu ``--metrics`` that would supply ``quantity`` (first recipe)."""
    q = QUANTITY_BY_NAME[quantity]
    metrics = ",".join(q.recipes[0].inputs()) if q.recipes else ""
    return f"--metrics {metrics}" if metrics else NCU_ROOFLINE_FLAGS


def recipe_markdown() -> str:
    """The recipe table as Markdown (docs/metrics.md embeds it; a test keeps the two in sync)."""
    lines = ["| quantity | unit | recipes in order of preference |", "|---|---|---|"]
    for quantity in QUANTITIES:
        parts = []
        for i, recipe in enumerate(quantity.recipes, 1):
            terms = " + ".join(
                (f"{coef:g} × `{metric}`" if coef != 1 else f"`{metric}`") for coef, metric in recipe.terms
            )
            if recipe.scale:
                terms = f"({terms}) × " + " × ".join(f"`{s}`" for s in recipe.scale)
            if recipe.divide:
                terms += " ÷ " + " ÷ ".join(f"`{d}`" for d in recipe.divide)
            arch = ""
            if recipe.cc_min or recipe.cc_max:
                arch = f" [sm_{recipe.cc_min}–sm_{recipe.cc_max}]"
            family = f" (family `{recipe.family}`)" if recipe.family else ""
            parts.append(f"{i}. **{recipe.name}**{arch}{family}: {terms}")
        lines.append(f"| `{quantity.name}` | {quantity.unit} | {'<br>'.join(parts)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(recipe_markdown(), end="")
