"""One series' state between nights: forgetting the nights no later night looks at changes nothing."""

import pandas as pd
import pytest

from roofline.nightly.engine import decide_all
from roofline.nightly.series_rule import SeriesState
from roofline.nightly.store import history_frame


def spiky_series(nights: int = 70, every: int = 3, change_at: int = 62) -> pd.DataFrame:
    """One kernel with a +40 % one-night spike every ``every`` nights (each becomes an outlier, so
    the valid nights a new segment's noise needs reach far back), and a driver change."""
    rows = []
    for n in range(nights):
        day = f"2026-{1 + n // 28:02d}-{1 + n % 28:02d}"
        spike = 12 <= n < change_at and n % every == every - 1  # quiet start and end
        t = 1e-3 * (1.0, 1.01, 0.99, 1.005)[n % 4] * (1.4 if spike else 1.0)
        rows.append({"run_id": day, "run_date": day, "app": "app", "device": "GPU", "kernel": "k",
                     "grid": "(1, 1, 1)", "block": "(64, 1, 1)", "launches": 1, "duration_s": t,
                     "flop": 1e9, "flop_total": 1e9, "dram_bytes": 1e8, "bound": "memory:dram",
                     "driver_version": "550" if n < change_at else "560"})
    return history_frame(pd.DataFrame(rows))


@pytest.mark.parametrize("params", [{}, {"window": 3, "noise_window": 4, "min_nights": 2},
                                    {"noise_method": "level"}])
def test_trimmed_nights_give_the_decisions_of_all_nights(monkeypatch, params):
    history = spiky_series()
    trimmed = decide_all(history, params)
    assert (trimmed["label"] == "outlier").sum() >= 15
    assert trimmed["label"].iat[62] == "environment_change"
    monkeypatch.setattr(SeriesState, "trim", lambda self: None)
    pd.testing.assert_frame_equal(decide_all(history, params), trimmed, check_exact=True)
