"""The notebook API (roofline.read / analyse / chart): the same tables as the CLI and the workflow,
a cheap ``import roofline``, and the README's example run as written, so the docs cannot rot."""

import ast
import json
import re
import subprocess
import sys
import warnings

import altair as alt
import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from test_cli import A100_80, TEXTBOOK, nersc_csv, silu_report  # the same inputs

import roofline
from roofline import api
from roofline.ceilings.catalog import CATALOG_PATH


def test_import_roofline_is_cheap():
    """`import roofline` loads neither pandas nor Altair (nor numpy, pyarrow, pydantic); the API's
    names are there, imported on first use."""
    code = (
        "import sys, json, roofline\n"
        "heavy = ('pandas', 'numpy', 'altair', 'pyarrow', 'pydantic', 'roofline.api')\n"
        "before = [m for m in heavy if m in sys.modules]\n"
        "names = sorted(n for n in ('read', 'analyse', 'plot', 'Analysis') if n in dir(roofline))\n"
        "roofline.read\n"
        "print(json.dumps([before, names, 'pandas' in sys.modules, 'altair' in sys.modules]))\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, names, pandas_after, altair_after = json.loads(ran.stdout)
    assert before == [] and names == ["Analysis", "analyse", "plot", "read"]
    assert pandas_after and not altair_after  # read needs pandas, not Altair
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        roofline.nothing  # noqa: B018


def test_read_names_the_device_of_an_export():
    path = nersc_csv()
    unnamed = roofline.read(path)
    named = roofline.read(path, device=A100_80, app="dropout")
    assert len(unnamed) == len(named) == 162
    assert set(unnamed["device"]) == {"unnamed GPU"} and set(named["device"]) == {A100_80}
    assert set(unnamed["app"]) == {"nsight162"} and set(named["app"]) == {"dropout"}
    pd.testing.assert_series_equal(unnamed["dram_bytes"], named["dram_bytes"])
    recorded = roofline.read(silu_report(), device=A100_80)  # a device the file records wins
    assert set(recorded["device"]) == {"NVIDIA A100-SXM4-40GB"}


def test_read_a_bad_file_says_which_and_why(tmp_path):
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "missing.ncu-rep"))):
        roofline.read(tmp_path / "missing.ncu-rep")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a profile\n")
    with pytest.raises(ValueError, match="unknown file type '.txt'.*rename it"):
        roofline.read(notes)


def test_analyse_files_or_tables_alike():
    """Paths and the tables read() returned give the same analysis; launches are the classified
    table, one row per launch; kernels are judged against the selected ceilings."""
    report = silu_report()
    from_path = roofline.analyse(report)
    from_table = roofline.analyse([roofline.read(report)])
    pd.testing.assert_frame_equal(from_path.kernels, from_table.kernels)
    pd.testing.assert_frame_equal(from_path.ceilings, from_table.ceilings)
    assert isinstance(from_path, roofline.Analysis) and from_path.errors == ()
    launches = from_path.launches
    assert len(launches) == len(from_path.counters) == 3 and set(launches["bound"]) == {"memory:dram"}
    dram = from_path.ceilings.query("selected and kind == 'memory' and name == 'dram'")["value"].iat[0]
    assert (launches["roof_dram_bw"] == dram).all()
    assert "1 kernel of 1 app on NVIDIA A100-SXM4-40GB" in repr(from_path)


def test_digest_false_leaves_only_the_provenance_digest_out():
    """digest=False (what the CLI asks, which shows no counters) leaves source_sha256 empty and
    changes nothing else; by default it is the file's sha256."""
    import hashlib

    path = nersc_csv()
    hashed, plain = roofline.analyse(path, device=A100_80), roofline.analyse(path, device=A100_80, digest=False)
    assert set(hashed.counters["source_sha256"]) == {hashlib.sha256(path.read_bytes()).hexdigest()}
    assert set(plain.counters["source_sha256"]) == {""}
    pd.testing.assert_frame_equal(plain.counters.drop(columns="source_sha256"),
                                  hashed.counters.drop(columns="source_sha256"))
    for table in ("kernels", "ceilings", "diagnostics"):
        pd.testing.assert_frame_equal(getattr(plain, table), getattr(hashed, table))
    assert set(roofline.read(path, digest=False)["source_sha256"]) == {""}


def test_analyse_with_the_catalog_policy_and_device():
    """device= gives an export the catalog's roofs: with policy datasheet only, every selected
    ceiling is the catalog's (checked against roofline.ceilings.catalog's own rows for that GPU), its compute
    roofs held at the SM clock the export's launch ran at (the CSV's sm__cycles_elapsed.avg.per_second)."""
    from roofline.ceilings.catalog import catalog_ceilings, load_catalog

    result = roofline.analyse(nersc_csv(), catalog=CATALOG_PATH, policy=["datasheet"], device=A100_80)
    (kernel,) = result.kernels.to_dict("records")
    assert kernel["bound"] == "memory:dram" and kernel["ceiling_source"] == "datasheet"
    sheet = catalog_ceilings(load_catalog(CATALOG_PATH), A100_80).set_index(["kind", "name"])
    launches = result.counters
    long = launches[launches["duration_s"] >= 20e-6]  # short launches' clock readings run low
    clock = (long if len(long) else launches)["sm_clock_hz"].median()
    assert 0.9e9 < clock < 1.2e9  # not the 1.41 GHz boost clock the catalog's figures assume
    compute = sheet.index.get_level_values("kind") == "compute"
    expected = sheet["value"].where(~compute, sheet["value"] / sheet["clock_hz"] * clock)
    chosen = result.ceilings[result.ceilings["selected"]].set_index(["kind", "name"])
    pd.testing.assert_series_equal(chosen["value"].sort_index(), expected.sort_index(), check_names=False)
    assert (chosen.loc["compute", "clock_hz"] == clock).all()
    sheet = sheet["value"]
    assert kernel["roof_dram_bw"] == sheet[("memory", "dram")]


def test_analyse_without_a_device_warns_how_to_name_it():
    result = roofline.analyse(nersc_csv())
    assert result.kernels["bound"].tolist() == ["unknown"]
    (hint,) = result.diagnostics.query("stage == 'ceilings'")["message"]
    assert "'unnamed GPU'" in hint and "device=" in hint


def test_analyse_errors_warn_raise_or_collect(tmp_path):
    bad = tmp_path / "broken.ncu-rep"
    bad.write_bytes(b"not a report")
    with pytest.warns(UserWarning, match=re.escape(str(bad))):
        warned = roofline.analyse([bad, TEXTBOOK])
    assert len(warned.errors) == 1 and warned.errors[0].startswith(f"{bad}: ") and len(warned.kernels) > 5
    assert warned.diagnostics.query("severity == 'error'")["source_file"].tolist() == [str(bad)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = roofline.analyse([bad], errors="ignore")
    assert quiet.kernels.empty and quiet.ceilings.empty and quiet.launches.empty and len(quiet.errors) == 1
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        roofline.analyse([TEXTBOOK, bad], errors="raise")
    with pytest.raises(ValueError, match="unknown source"):
        roofline.analyse(TEXTBOOK, policy=["guess"])


def test_plot_draws_the_reports_roofline():
    """plot() is roofline.charts.roofline_chart.roofline_chart for the one device; Vega-Lite compiles it (vl-convert,
    offline) and Jupyter gets an HTML bundle that draws without a CDN when asked to."""
    import vl_convert

    from roofline.charts.roofline_chart import roofline_chart

    result = roofline.analyse(silu_report())
    drawn = roofline.plot(result)
    assert isinstance(drawn, alt.TopLevelMixin)
    reference = roofline_chart(result.kernels, result.ceilings, "NVIDIA A100-SXM4-40GB")
    assert drawn.to_dict() == reference.to_dict()
    svg = vl_convert.vegalite_to_svg(drawn.to_json())
    assert svg.startswith("<svg") and "NVIDIA A100-SXM4-40GB" in svg
    with alt.renderers.enable("html", template="inline"):
        bundle = drawn._repr_mimebundle_()
    html = (bundle[0] if isinstance(bundle, tuple) else bundle)["text/html"]
    assert "silu_kernel" in html and "cdn.jsdelivr" not in html


def test_plot_asks_for_a_device_when_there_are_several():
    result = roofline.analyse([silu_report(), roofline.read(nersc_csv(), device=A100_80)])
    assert result.devices == ["NVIDIA A100-SXM4-40GB", A100_80]
    with pytest.raises(ValueError, match="pass device= one of"):
        roofline.plot(result)
    with pytest.raises(ValueError, match="has no kernel"):
        roofline.plot(result, device="NVIDIA H100")
    assert isinstance(roofline.plot(result, device=A100_80), alt.TopLevelMixin)


def readme_example() -> str:
    """The ```python block of the README's notebook section."""
    text = (REPO / "README.md").read_text()
    section = text.split("## In a notebook (Python API)", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return block


def test_readme_example_runs():
    """The README's notebook example, run as written with its two file names replaced by the real
    fixtures it stands for; its last line (what a notebook would draw) is a chart."""
    block = readme_example()
    for name, path in (("profile.ncu-rep", silu_report()), ("nsight162.csv", nersc_csv())):
        assert block.count(f'"{name}"') == 1, f"the README example no longer names {name!r}"
        block = block.replace(f'"{name}"', repr(str(path)))
    tree = ast.parse(block)
    last = tree.body.pop()
    assert isinstance(last, ast.Expr), "the README example should end with the chart it draws"
    namespace: dict = {}
    exec(compile(tree, "README.md", "exec"), namespace)  # noqa: S102 - the documentation's own code
    shown = eval(compile(ast.Expression(last.value), "README.md", "eval"), namespace)  # noqa: S307
    assert isinstance(shown, alt.TopLevelMixin)
    result = namespace["result"]
    assert set(result.kernels["device"]) == {"NVIDIA A100-SXM4-40GB", A100_80}
    assert np.isfinite(result.kernels["roof_pct"]).all() and result.errors == ()


def test_cli_and_api_agree(capsys):
    """`roofline show --format json` prints roofline.analyse's kernels (the CLI calls it)."""
    from roofline import cli

    assert cli.main(["show", str(nersc_csv()), "--device", A100_80, "--format", "json", "--all-columns"]) == 0
    (printed,) = json.loads(capsys.readouterr().out)
    (kernel,) = api.analyse(nersc_csv(), device=A100_80).kernels.to_dict("records")
    for column, value in kernel.items():
        if isinstance(value, float) and np.isfinite(value):
            assert printed[column] == value, column


def test_analyse_a_folder_csv_exports_one_app_each_report_its_own(tmp_path):
    """A folder of one run's CSV exports stays one app named after the folder (the rtx5090 fixture's
    kernel folders); with reports beside them, each report is an app of its own, and what is no
    input is a line of ``skipped`` (and a warning)."""
    from conftest import real_fixture

    exports = sorted(real_fixture("rtx5090-llm-kernels-csv-ncu2025").glob("kernel_0001_*"))[0]
    alone = api.analyse(exports, device="NVIDIA GeForce RTX 5090")
    assert set(alone.kernels["app"]) == {exports.name} and len(alone.kernels) == 1 and alone.skipped == ()
    mixed = tmp_path / "night"
    mixed.mkdir()
    for export in exports.iterdir():
        (mixed / export.name).symlink_to(export)
    (mixed / "silu.ncu-rep").symlink_to(silu_report())
    (mixed / "PROVENANCE.md").write_text("hand-made\n")
    with pytest.warns(UserWarning, match=r"skipped .*PROVENANCE\.md: unknown file type '\.md'"):
        result = api.analyse(mixed, device="NVIDIA GeForce RTX 5090")
    assert set(result.kernels["app"]) == {"night", "silu"} and result.errors == ()
    assert len(result.skipped) == 1 and result.skipped[0].startswith(f"{mixed / 'PROVENANCE.md'}: unknown file type")
    (row,) = result.diagnostics[result.diagnostics["message"].str.startswith("skipped")].to_dict("records")
    assert row["severity"] == "warning" and row["source_file"] == str(mixed / "PROVENANCE.md")
    assert api.source_paths([mixed]) == {"night": str(mixed), "silu": str(mixed / "silu.ncu-rep")}


SCRIPT_SRC = re.compile(r"<script[^>]*\bsrc=", re.I)


def test_plot_saves_a_page_that_draws_offline(tmp_path):
    """`roofline.plot(result).save("roofline.html")` (the README's line) writes a page whose
    scripts are all inline, Vega among them; `inline=False` gives Altair's CDN page; other formats
    save without Altair's warning that inline does not apply."""
    chart = roofline.plot(roofline.analyse(TEXTBOOK), device="NVIDIA A100-SXM4-80GB")
    page = tmp_path / "roofline.html"
    chart.save(page)
    text = page.read_text()
    assert not SCRIPT_SRC.search(text) and "cdn.jsdelivr" not in text
    assert "vegaEmbed" in text and "vega-lite" in text.lower() and len(text) > 500_000  # the libraries themselves
    chart.save(tmp_path / "named.html", "html")
    assert not SCRIPT_SRC.search((tmp_path / "named.html").read_text())
    chart.save(tmp_path / "cdn.html", inline=False)
    cdn = (tmp_path / "cdn.html").read_text()
    assert '<script type="text/javascript" src="https://cdn.jsdelivr.net/npm/vega@' in cdn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chart.save(tmp_path / "roofline.json")
    assert json.loads((tmp_path / "roofline.json").read_text())["datasets"]
    assert type(chart.properties(width=300)) is type(chart)  # Altair's copies keep the offline save


@pytest.mark.browser
def test_saved_plot_draws_in_chromium_without_network(tmp_path):
    """The saved page drawn by headless Chromium with every network request sent to a dead proxy:
    the offline page draws its chart; the CDN page, under the same conditions, draws nothing (so
    the network was off)."""
    from test_browser import chromium

    chart = roofline.plot(roofline.analyse(TEXTBOOK), device="NVIDIA A100-SXM4-80GB")
    dead = ["--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
    drawn = {}
    for name, inline in (("offline", True), ("cdn", False)):
        page = tmp_path / f"{name}.html"
        chart.save(page, inline=inline)
        drawn[name] = chromium(page.as_uri(), tmp_path / f"profile-{name}", *dead, "--dump-dom").stdout
    marks = re.compile(r'id="vis"[^>]*>.*?<(canvas|svg)[^>]*class="marks"', re.S)  # what Vega drew into the page
    assert marks.search(drawn["offline"]) and "NVIDIA A100-SXM4-80GB" in drawn["offline"], drawn["offline"][-2000:]
    assert not marks.search(drawn["cdn"])
