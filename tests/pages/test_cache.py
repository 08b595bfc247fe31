"""The pages' cache (roofline/pages/cache.py): a device's chart spec comes back from the user's cache
folder exactly as built, only for the same rows, ceilings and code, and a bad folder costs nothing
but the build."""

import json

import pandas as pd
import pytest
from charts.test_roofline_chart import make_ceilings, make_kernels

from roofline.charts import roofline_chart
from roofline.pages import cache, report
from roofline.tables.schemas import conform


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """An empty cache folder of this test's own, and no spec kept in the process from another test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("ROOFLINE_CHART_CACHE", raising=False)
    monkeypatch.setattr(cache, "_BUILT", {})
    return tmp_path / "xdg" / "roofline" / "charts"


class Builds:
    """A spec builder that counts its calls."""

    def __init__(self, kernels, ceilings, device="GPU-A", top_kernels=roofline_chart.TOP_N_DEFAULT):
        self.calls = 0
        self.args = kernels, ceilings, device
        self.top_kernels = top_kernels

    def __call__(self):
        self.calls += 1
        return roofline_chart.roofline_spec(*self.args, rows=False, top_kernels=self.top_kernels)


def spec(kernels, ceilings, builds, device="GPU-A"):
    return cache.device_spec(kernels, ceilings, device, builds, builds.top_kernels)


def test_a_spec_is_built_once_then_read_back_as_built(folder, monkeypatch):
    kernels, ceilings = make_kernels(), make_ceilings()
    builds = Builds(kernels, ceilings)
    first = spec(kernels, ceilings, builds)
    assert builds.calls == 1 and len(list(folder.glob("*.json"))) == 1
    monkeypatch.setattr(cache, "_BUILT", {})  # as in the next run's process
    again = spec(kernels.copy(), ceilings.copy(), builds)
    assert builds.calls == 1
    assert again == first == roofline_chart.roofline_spec(kernels, ceilings, "GPU-A", rows=False)
    assert json.dumps(again) == json.dumps(first)  # same key order: the page's bytes do not move
    again["title"] = "changed by a caller"
    assert spec(kernels, ceilings, builds)["title"] != "changed by a caller"  # each caller its own copy


@pytest.mark.parametrize("change", ["one kernel value", "row order", "ceiling", "device", "code", "kernels drawn"])
def test_anything_the_spec_is_built_from_builds_it_again(folder, monkeypatch, change):
    kernels, ceilings, device = make_kernels(), make_ceilings(), "GPU-A"
    builds = Builds(kernels, ceilings)
    spec(kernels, ceilings, builds)
    monkeypatch.setattr(cache, "_BUILT", {})
    if change == "one kernel value":
        kernels = kernels.copy()
        kernels.loc[2, "performance"] *= 1.0001
    elif change == "row order":
        kernels = kernels.iloc[::-1].reset_index(drop=True)
    elif change == "ceiling":
        ceilings = ceilings.copy()
        ceilings.loc[ceilings["name"] == "dram", "value"] *= 2
    elif change == "device":
        device = "GPU-B"
    elif change == "kernels drawn":
        builds.top_kernels = 3
    else:
        monkeypatch.setattr(cache, "_code_key", lambda: "another version of the pages")
    spec(kernels, ceilings, builds, device)
    assert builds.calls == 2


def test_a_damaged_entry_is_built_again_and_replaced(folder):
    kernels, ceilings = make_kernels(), make_ceilings()
    builds = Builds(kernels, ceilings)
    first = spec(kernels, ceilings, builds)
    (entry,) = folder.glob("*.json")
    entry.write_text('{"truncated": ', encoding="utf-8")
    cache._BUILT.clear()
    assert spec(kernels, ceilings, builds) == first and builds.calls == 2
    assert json.loads(entry.read_text(encoding="utf-8")) == first


def test_an_unusable_folder_or_the_switch_off_only_costs_the_build(tmp_path, monkeypatch):
    kernels, ceilings = make_kernels(), make_ceilings()
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    monkeypatch.setattr(cache, "_BUILT", {})
    builds = Builds(kernels, ceilings)
    assert spec(kernels, ceilings, builds) == roofline_chart.roofline_spec(kernels, ceilings, "GPU-A", rows=False)

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("ROOFLINE_CHART_CACHE", "off")
    monkeypatch.setattr(cache, "_BUILT", {})
    spec(kernels, ceilings, builds)
    assert builds.calls == 2 and not (tmp_path / "xdg").exists()


def test_without_the_package_files_nothing_is_kept_between_runs(folder, monkeypatch):
    kernels, ceilings = make_kernels(), make_ceilings()
    monkeypatch.setattr(cache, "_code_key", lambda: None)
    builds = Builds(kernels, ceilings)
    assert spec(kernels, ceilings, builds) == roofline_chart.roofline_spec(kernels, ceilings, "GPU-A", rows=False)
    assert builds.calls == 1 and not folder.exists()


def test_the_folder_keeps_the_newest_specs(folder, monkeypatch):
    monkeypatch.setattr(cache, "KEPT_SPECS", 3)
    ceilings = make_ceilings()
    for seed in range(5):
        kernels = make_kernels(seed=seed)
        spec(kernels, ceilings, Builds(kernels, ceilings))
    assert len(list(folder.glob("*.json"))) == 3
    newest = make_kernels(seed=4)
    monkeypatch.setattr(cache, "_BUILT", {})
    builds = Builds(newest, ceilings)
    spec(newest, ceilings, builds)
    assert builds.calls == 0


def test_pages_written_from_the_cache_equal_pages_built_without_it(folder, tmp_path, monkeypatch):
    """Two devices; the second run changes one device's rows: the other device's chart is read
    back, and every page and the shared charts file equal those of a run without the cache."""
    kernels = pd.concat([make_kernels(device="GPU-A"), make_kernels(device="GPU-B", seed=1)], ignore_index=True)
    kernels["app"] = ["a1", "a2"] * (len(kernels) // 2)
    ceilings = pd.concat([make_ceilings("GPU-A"), make_ceilings("GPU-B")], ignore_index=True)
    diagnostics = conform(pd.DataFrame(), "diagnostics")

    def written(frame, name, cached):
        if cached:
            monkeypatch.delenv("ROOFLINE_CHART_CACHE", raising=False)
        else:
            monkeypatch.setenv("ROOFLINE_CHART_CACHE", "off")
        monkeypatch.setattr(cache, "_BUILT", {})
        out = tmp_path / name / "summary.html"
        report.write_pages(frame, ceilings, diagnostics, out, out.parent / "apps", "t")
        return {p.relative_to(out.parent).as_posix(): p.read_bytes() for p in sorted(out.parent.rglob("*.*"))}

    built = []
    real = roofline_chart.roofline_spec
    monkeypatch.setattr(report, "roofline_spec", lambda k, c, d, rows=True, top_kernels=roofline_chart.TOP_N_DEFAULT:
                        built.append(d) or real(k, c, d, rows, top_kernels))
    assert written(kernels, "cold", True) == written(kernels, "off", False)
    moved = kernels.copy()
    moved.loc[moved["device"] == "GPU-B", "duration_s"] *= 1.5
    built.clear()
    warm = written(moved, "warm", True)
    assert built == ["GPU-B"]  # GPU-A's chart came from the folder
    assert warm == written(moved, "moved-off", False)
