"""Report size and draw time at 100k launches / 5,000 kernels.

The generated 100k-launch NERSC-style CSV (5,000 kernels) goes through parse, ceilings and classify
in-process; the report stage then runs as the workflow runs it (``python -m roofline.stages.report``), and
the summary page is drawn in headless Chromium (Debian's ``chromium``; ``apt-get install chromium``).
Draw time = Chromium's wall time on the page minus its wall time on a blank page (the in-run
baseline: browser start and exit). A copy of the page with a probe script is dumped to check that
every chart was drawn (``data-rendered``), not an error.

Goals: page <= 5 MB, drawn <= 3 s.

``--apps 1000``: the summary at fleet scale instead. The first 10 apps of the generated 2,000-launch
set (benchmarks/generate.py) are analysed together, then their kernels tables are repeated to N apps
(app i is template i mod 10, its kernels' times scaled by a seeded log-normal factor): N x ~100
kernels. The report stage writes the summary, N app pages and the shared Vega bundle; sizes and
Chromium draw times are given as ratios against a blank page measured in the same run.

    python benchmarks/bench_report.py [--quick] [--apps 1000]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BENCH_TMP, PY, REPO, fresh_dir, gb, job_env, record, run_tracked, warm_bytecode  # noqa: E402
from generate import NERSC_DEVICE, generate_big  # noqa: E402

from roofline.ceilings.select import build_ceilings  # noqa: E402
from roofline.classify.kernels import aggregate_kernels  # noqa: E402
from roofline.parse.counters import diagnostics_for, parse_input  # noqa: E402
from roofline.tables.files import write_table  # noqa: E402

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic", "--virtual-time-budget=10000",
]
PROBE = """<script>
window.addEventListener('load', function () { setTimeout(function () {
  var charts = document.querySelectorAll('.chart');
  var drawn = document.querySelectorAll('.chart[data-rendered="yes"]');
  var failed = document.querySelectorAll('.chart[data-error]');
  document.body.setAttribute('data-probe', charts.length + '/' + drawn.length + '/' + failed.length);
}, 2000); });
</script></body>"""


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(page: Path, profile: Path, *extra: str):
    cmd = [chromium_binary(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()]
    return run_tracked(cmd, timeout=120)


def fleet_kernels(apps: int, seed: int = 3):
    """(kernels, ceilings) of ``apps`` apps, repeated from 10 analysed generated apps (see the docstring)."""
    import numpy as np
    import pandas as pd
    from generate import generate_apps

    import roofline

    manifest = generate_apps(BENCH_TMP / "apps-2000", 10, 2000)
    result = roofline.analyse([a["path"] for a in manifest["apps"]], device=NERSC_DEVICE, errors="ignore")
    templates = dict(tuple(result.kernels.groupby("app")))
    names = sorted(templates)
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(apps):
        k = templates[names[i % len(names)]].copy()
        factor = rng.lognormal(0.0, 0.5)
        k["app"] = f"app_{i:04d}"
        for column in ("duration_s", "predicted_duration_s"):
            k[column] = k[column] * factor
        k["performance"] = k["performance"] / factor
        k["roof_pct"] = (k["roof_pct"] / factor).clip(upper=100)
        k["priority"] = k["time_share"] * (1 - k["roof_pct"] / 100)
        frames.append(k)
    return pd.concat(frames, ignore_index=True), result.ceilings


def fleet(args) -> int:
    """The summary at ``args.apps`` apps: sizes and draw times as ratios against a blank page."""
    import pandas as pd

    from roofline.tables.schemas import conform

    kernels, ceilings = fleet_kernels(args.apps)
    work = fresh_dir(BENCH_TMP / "report-apps")
    tables = {name: work / f"{name}.parquet" for name in ("kernels", "ceilings", "diagnostics")}
    write_table(kernels, "kernels", tables["kernels"])
    write_table(ceilings, "ceilings", tables["ceilings"])
    write_table(conform(pd.DataFrame(), "diagnostics"), "diagnostics", tables["diagnostics"])
    env = job_env(True)
    warm_bytecode(env)
    summary = work / "reports" / "summary.html"
    cmd = [PY, "-m", "roofline.stages.report", "--kernels", str(tables["kernels"]),
           "--ceilings", str(tables["ceilings"]),
           "--diagnostics", str(tables["diagnostics"]), "--output", str(summary), "--apps-dir",
           str(work / "reports" / "apps"), "--title", f"bench {args.apps} apps"]
    run = run_tracked(cmd, cwd=REPO, env=env)
    if run.rc != 0:
        raise SystemExit(f"report failed:\n{run.text[-3000:]}")
    pages = sorted((work / "reports" / "apps").glob("*.html"))
    bundle = work / "reports" / "assets" / "vega-bundle.js"
    blank = work / "reports" / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body><p>blank (benchmark baseline)</p></body></html>\n")
    sizes = {"blank page": blank.stat().st_size, "summary.html": summary.stat().st_size,
             "largest app page": max(p.stat().st_size for p in pages), "vega-bundle.js (once)": bundle.stat().st_size}
    rows = [["report job (python -m roofline.stages.report)", f"{run.wall_s:.1f} s", "", "", gb(run.max_proc_rss)]]
    rows += [[what, f"{size / 1e6:.3f} MB", f"{size / sizes['blank page']:,.0f}x", "<= 5 MB" if what == "summary.html"
              else "", ""] for what, size in sizes.items()]
    total = sum(p.stat().st_size for p in pages)
    rows.append([f"all {len(pages)} app pages", f"{total / 1e6:.1f} MB", "", "", ""])
    ok = sizes["summary.html"] <= 5e6
    if chromium_binary() is not None:
        probe = work / "reports" / "probe.html"
        head, _, tail = summary.read_text(encoding="utf-8").rpartition("</body>")
        probe.write_text(head + PROBE + tail, encoding="utf-8")
        dom = chromium(probe, work / "profile-probe", "--dump-dom").stdout
        found = re.search(r'data-probe="(\d+)/(\d+)/(\d+)"', dom)
        charts, drawn, failed = (int(x) for x in found.groups()) if found else (0, 0, 0)
        times = {"blank": [], "summary": [], "app": []}
        for i in range(args.repeat):
            for what, page in (("blank", blank), ("summary", summary), ("app", pages[0])):
                times[what].append(chromium(page, work / f"profile-{what}{i}", f"--screenshot={work / 'shot.png'}",
                                            "--window-size=1280,2000").wall_s)
        base = statistics.median(times["blank"])
        for what in ("summary", "app"):
            wall = statistics.median(times[what])
            rows.append([f"chromium, {what} page (blank {base:.2f} s)", f"{wall:.2f} s", f"{wall / base:.2f}x",
                         "draw <= 3 s" if what == "summary" else "", f"draw {wall - base:.2f} s"])
        draw = statistics.median(times["summary"]) - base
        ok &= draw <= 3 and charts > 0 and drawn == charts
        rows.append(["summary charts drawn / on the page (errors)", f"{drawn} / {charts} ({failed})", "", "all", ""])
    print("\n".join(" | ".join(map(str, r)) for r in rows))
    if not args.no_record:
        record("bench_report_apps", f"Summary at {args.apps:,} apps / {len(kernels):,} kernels",
               ["what", "figure", "/ blank page", "goal", "note"], rows,
               [f"{args.apps} apps repeated from 10 generated apps analysed together ({len(kernels):,} kernels, "
                f"{kernels['device'].nunique()} devices); the summary carries at most 2,000 kernels and one row per "
                f"app; every page loads the one vega-bundle.js by relative path. Medians of {args.repeat} Chromium "
                f"runs; draw = page - blank page in the same run. Verdict: {'met' if ok else '**not met**'}."])
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k launches / 1,000 kernels")
    parser.add_argument("--apps", type=int, help="the summary at this many apps (e.g. 1000) instead")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    if args.apps:
        return fleet(args)
    n = 20_000 if args.quick else 100_000
    path = generate_big(BENCH_TMP / ("long-20k" if args.quick else "big"), n, n // 20)
    work = fresh_dir(BENCH_TMP / "report")
    counters = parse_input(path, "big", "csv", NERSC_DEVICE)
    ceilings = build_ceilings(counters, REPO / "roofline" / "data" / "gpus.yaml", ["report", "datasheet"])
    kernels = aggregate_kernels(counters, ceilings)
    tables = {
        "kernels": work / "kernels.parquet",
        "ceilings": work / "ceilings.parquet",
        "diagnostics": work / "diagnostics.parquet",
    }
    write_table(kernels, "kernels", tables["kernels"])
    write_table(ceilings, "ceilings", tables["ceilings"])
    write_table(diagnostics_for(counters, "big"), "diagnostics", tables["diagnostics"])
    del counters

    env = job_env(True)
    warm_bytecode(env)
    summary = work / "reports" / "summary.html"
    cmd = [PY, "-m", "roofline.stages.report", "--kernels", str(tables["kernels"]),
           "--ceilings", str(tables["ceilings"]),
           "--diagnostics", str(tables["diagnostics"]), "--output", str(summary), "--apps-dir",
           str(work / "reports" / "apps"), "--title", "bench 100k launches"]
    report_run = run_tracked(cmd, cwd=REPO, env=env)
    if report_run.rc != 0:
        raise SystemExit(f"report failed:\n{report_run.text[-3000:]}")
    size = summary.stat().st_size
    app_pages = sorted((work / "reports" / "apps").glob("*.html"))
    print(f"{len(kernels)} kernels: report job {report_run.wall_s:.1f} s, {gb(report_run.max_proc_rss)}; "
          f"summary.html {size / 1e6:.2f} MB, app page {app_pages[0].stat().st_size / 1e6:.2f} MB")

    rows = [
        ["report job (python -m roofline.stages.report)", f"{report_run.wall_s:.1f} s", "", gb(report_run.max_proc_rss),
         ""],
        ["summary.html size", f"{size / 1e6:.2f} MB", "<= 5 MB", "", "met" if size <= 5e6 else "**not met**"],
    ]
    ok = size <= 5e6
    if chromium_binary() is None:
        rows.append(["draw time", "chromium not installed (apt-get install chromium)", "<= 3 s", "", "not measured"])
    else:
        blank = work / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body><p>blank (benchmark baseline)</p></body></html>\n")
        probe = work / "reports" / "probe.html"
        head, _, tail = summary.read_text(encoding="utf-8").rpartition("</body>")
        probe.write_text(head + PROBE + tail, encoding="utf-8")
        dom = chromium(probe, work / "profile-probe", "--dump-dom")
        found = re.search(r'data-probe="(\d+)/(\d+)/(\d+)"', dom.stdout)
        charts, drawn, failed = (int(x) for x in found.groups()) if found else (0, 0, 0)
        base, page = [], []
        for i in range(args.repeat):
            base.append(chromium(blank, work / f"profile-b{i}", f"--screenshot={work / 'blank.png'}").wall_s)
            page.append(chromium(summary, work / f"profile-p{i}", f"--screenshot={work / 'summary.png'}",
                                 "--window-size=1280,2000").wall_s)
        draw = statistics.median(page) - statistics.median(base)
        ok &= draw <= 3 and charts > 0 and drawn == charts
        print(f"chromium: blank {statistics.median(base):.2f} s, summary {statistics.median(page):.2f} s, draw "
              f"{draw:.2f} s; charts {charts}, drawn {drawn}, failed {failed}")
        rows += [
            ["chromium, blank page (baseline)", f"{statistics.median(base):.2f} s", "", "", ""],
            ["chromium, summary.html", f"{statistics.median(page):.2f} s", "", "", ""],
            ["draw time (summary - blank)", f"{draw:.2f} s", "<= 3 s", "",
             "met" if draw <= 3 else "**not met**"],
            ["charts drawn / on the page (errors)", f"{drawn} / {charts} ({failed})", "all", "",
             "met" if charts and drawn == charts else "**not met**"],
        ]
    notes = [f"{path.name}: {n:,} launches, {len(kernels):,} kernels on one device; medians of {args.repeat} "
             "Chromium runs (flags as in the issue, `--virtual-time-budget=10000`)."]
    if not args.no_record:
        record("bench_report", f"Report at {n // 1000}k launches / {len(kernels):,} kernels",
               ["what", "figure", "goal", "largest process RSS", "verdict"], rows, notes)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
