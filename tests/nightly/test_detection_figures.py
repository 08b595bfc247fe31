"""The published detection figures: docs/tracking.md's table is the shipped data file's, the file is the
current rule's (tests/pages/test_trends.py: the trends page shows it); the slow test reruns the seeded
campaign and compares."""


import pytest
from conftest import REPO, tracking_simulator

from roofline.nightly import detection_figures as df
from roofline.nightly.series_rule import RULE_VERSION


def test_the_docs_table_is_the_shipped_files():
    docs = (REPO / "docs" / "tracking.md").read_text(encoding="utf-8")
    assert df.docs_table(docs) == df.figures_markdown(df.read_figures())
    assert df.COMMAND in docs


def test_the_shipped_figures_are_the_current_rules_and_campaigns():
    figures = df.read_figures()
    sim = tracking_simulator()
    assert figures["rule_version"] == RULE_VERSION, f"rule changed: run {df.COMMAND}"
    assert figures["campaign"] == sim.DETECTION["campaign"]
    assert [level["noise"] for level in figures["noise_levels"]] == list(sim.DETECTION["noise"])
    for level in figures["noise_levels"]:
        assert [row["step"] for row in level["steps"]] == list(sim.DETECTION["steps"])
        assert level["kernel_nights"] > 0


def test_the_html_table_shows_the_files_figures():
    html = df.figures_html(df.read_figures())
    assert "<h3>Detection on simulated nights</h3>" in html and df.COMMAND in html
    realistic = next(level for level in df.read_figures()["noise_levels"] if level["noise"] == 0.02)
    assert f"<td>{realistic['steps'][1]['detected'] / realistic['steps'][1]['n']:.1%}".replace("%", " %") in html


def test_a_missing_marker_is_an_error_not_a_silent_append():
    with pytest.raises(ValueError, match="markers"):
        df.replace_docs_table("# Nightly tracking\n", df.read_figures())


def test_a_small_campaign_scores_steps_and_false_alarms():
    sim = tracking_simulator()
    history, truth = sim.simulate_steps(7, 0.02, (0.05, 0.20), per_step=3, controls=3, nights=40,
                                        first_step_night=12, horizon=10)
    counts = sim.detection_counts(sim.decide_all(history), truth, 12, 10)
    assert len(counts["delays"]) == 6 and counts["kernel_nights"] > 3 * 28
    assert all(d is not None and 1 <= d <= 10 for s, d in counts["delays"] if s == 0.20)


@pytest.mark.slow
def test_rerunning_the_campaign_gives_the_published_figures():
    """About 15 s: the seeded campaign, as the command runs it."""
    assert tracking_simulator().detection_figures() == df.read_figures(), f"stale figures: run {df.COMMAND}"
