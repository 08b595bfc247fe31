"""The recipe table: well-formed, complete, and usable by capture."""

from roofline import metrics
from roofline.metrics import QUANTITIES, QUANTITY_BY_NAME


def test_every_quantity_has_a_recipe_and_unit():
    for quantity in QUANTITIES:
        assert quantity.recipes, quantity.name
        assert quantity.unit, quantity.name


def test_recipe_dependencies_come_earlier_in_the_table():
    seen = set()
    for quantity in QUANTITIES:
        for recipe in quantity.recipes:
            for dependency in recipe.depends_on():
                assert dependency in seen, f"{quantity.name}/{recipe.name} needs {dependency} first"
        seen.add(quantity.name)


def test_roofline_quantities_present():
    for name in (
        "duration_s",
        "flop_fp64",
        "flop_fp32",
        "flop_fp16",
        "dram_bytes",
        "l2_bytes",
        "l1_bytes",
        "peak_flops_fp32",
        "peak_dram_bw",
        *(f"flop_{c}" for c in metrics.TENSOR_CLASSES),
    ):
        assert name in QUANTITY_BY_NAME


def test_fma_counts_two_flop():
    recipe = QUANTITY_BY_NAME["flop_fp32"].recipes[0]
    weights = dict((metric.split("_op_")[1].split("_")[0], coef) for coef, metric in recipe.terms)
    assert weights == {"fadd": 1.0, "fmul": 1.0, "ffma": 2.0}


def test_capture_metrics_are_names_without_duplicates():
    names = metrics.capture_metrics()
    assert len(names) == len(set(names))
    assert "dram__bytes.sum" in names and "gpu__time_duration.sum" in names
    assert all("@" not in n for n in names)


def test_docs_recipe_table_is_in_sync():
    from conftest import REPO

    text = (REPO / "docs" / "metrics.md").read_text()
    assert text.endswith(metrics.recipe_markdown()), "regenerate with: python -m roofline.metrics"
