"""The recipe table: well-formed, complete, and usable by capture."""

from roofline.metrics import quantities
from roofline.metrics.quantities import QUANTITIES, QUANTITY_BY_NAME


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
        *(f"flop_{c}" for c in quantities.TENSOR_CLASSES),
    ):
        assert name in QUANTITY_BY_NAME


def test_every_tensor_class_has_work_and_roof_recipes_on_the_same_architectures():
    """A class's work is never judged on an architecture for which it has no roof recipe."""
    for cls in quantities.TENSOR_CLASSES:
        work = {(r.cc_min, r.cc_max) for r in QUANTITY_BY_NAME[f"flop_{cls}"].recipes}
        roof = {(r.cc_min, r.cc_max) for r in QUANTITY_BY_NAME[f"peak_flops_{cls}"].recipes}
        assert work - {(70, 72)} <= roof, cls  # Volta's roof is a datasheet value


def test_dense_classes_never_read_sparse_counters():
    for cls in quantities.TENSOR_CLASSES:
        names = [m for q in ("flop_", "peak_flops_") for r in QUANTITY_BY_NAME[q + cls].recipes for m in r.inputs()]
        if cls in quantities.SPARSE_OF:
            assert all("sparsity_on" in m for m in names), cls
        else:
            assert not any("sparsity_on" in m for m in names), cls


def test_capture_metrics_are_names_without_duplicates():
    from roofline.metrics.plan import plan_metrics

    names = plan_metrics().metrics
    assert len(names) == len(set(names))
    assert "dram__bytes.sum" in names and "gpu__time_duration.sum" in names
    assert all("@" not in n for n in names)


def test_docs_recipe_table_is_in_sync():
    from conftest import REPO

    text = (REPO / "docs" / "metrics.md").read_text()
    assert text.endswith(quantities.recipe_markdown()), "regenerate with: python -m roofline.metrics.quantities"
