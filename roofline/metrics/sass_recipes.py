"""Recipes read from executed SASS instruction counters: the CUDA-core work of one precision
(ADD, MUL and FMA thread instructions, with their FLOP weights) and its peak. The recipe table
that uses them is :data:`roofline.metrics.quantities.QUANTITIES`.
"""

from __future__ import annotations

from roofline.metrics.recipe import Recipe


def _sass(op: str, suffix: str = ".sum") -> str:
    return f"sm__sass_thread_inst_executed_op_{op}_pred_on{suffix}"


def _sass_rate(op: str) -> str:
    return f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"


def flop_recipes(prefix: str, fma_weight: float = 2.0, add_weight: float = 1.0,
                 packed: bool = False) -> tuple[Recipe, ...]:
    """Recipes of CUDA-core work from executed thread instructions: ``add_weight`` FLOP per ADD and
    MUL, ``fma_weight`` per FMA. With ``packed``, Blackwell's paired FP32 instructions
    (FADD2/FMUL2/FFMA2: two lanes of work per thread instruction) come first, counted twice."""
    add, mul, fma = f"{prefix}add", f"{prefix}mul", f"{prefix}fma"
    weights = ((add_weight, add), (add_weight, mul), (fma_weight, fma))
    op = prefix.upper()
    what = f"{add_weight:g} x {op}ADD + {add_weight:g} x {op}MUL + {fma_weight:g} x {op}FMA"
    recipes = []
    if packed:
        pairs = weights + tuple((2 * w, f"{op}2") for w, op in weights)
        recipes += [
            Recipe(
                "sass_inst_count_packed",
                tuple((w, _sass(op)) for w, op in pairs),
                note=f"{what} thread instructions, and twice that per FADD2/FMUL2/FFMA2 (sm_100 and later)",
                cc_min=100,
            ),
            Recipe(
                "sass_rate_packed_x_smsp_cycles",
                tuple((w, _sass_rate(op)) for w, op in pairs),
                scale=("@smsp_cycles",),
                note="per-cycle rates of the same instructions, paired FP32 included, x SMSP elapsed cycles",
                cc_min=100,
            ),
        ]
    recipes += [
        Recipe("sass_inst_count", tuple((w, _sass(op)) for w, op in weights), note=f"{what} thread instructions"),
        Recipe(
            "sass_rate_x_smsp_cycles",
            tuple((w, _sass_rate(op)) for w, op in weights),
            scale=("@smsp_cycles",),
            note="per-cycle rates of the same instructions x SMSP elapsed cycles (ncu --set full)",
        ),
        Recipe(
            "sass_fma_rate_only_x_smsp_cycles",
            ((fma_weight, _sass_rate(fma)),),
            scale=("@smsp_cycles",),
            note="only the FMA rate was collected (ADD/MUL empty): a lower bound of the work",
        ),
    ]
    return tuple(recipes)


def peak_flop_recipe(op: str, per_fma: float) -> tuple[Recipe, ...]:
    """The peak of one CUDA-core precision: ``per_fma`` FLOP x the FMA pipe's ``peak_sustained``
    instructions per cycle x the SM clock measured in the launch."""
    return (
        Recipe(
            "peak_sustained_x_sm_clock",
            ((per_fma, _sass(op, ".sum.peak_sustained")),),
            scale=("@sm_clock_hz",),
            note=f"{per_fma:g} x {op.upper()} peak_sustained per cycle x SM clock measured in the launch",
        ),
    )
