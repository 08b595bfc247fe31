"""Report size and draw time at 100k launches / 5,000 kernels.

The generated 100k-launch NERSC-style CSV (5,000 kernels) goes through parse, ceilings and classify
in-process; the report stage then runs as the workflow runs it (``python -m roofline.report``), and
the summary page is drawn in headless Chromium (Debian's ``chromium``; ``apt-get install chromium``).
Draw time = Chromium's wall time on the page minus its wall time on a blank page (the in-run
baseline: browser start and exit). A copy of the page with a probe script is dumped to check that
every chart was drawn (``data-rendered``), not an error.

Goals: page <= 5 MB, drawn <= 3 s.

    python benchmarks/bench_report.py [--quick]
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

from roofline.ceilings import build_ceilings  # noqa: E402
from roofline.classify import aggregate_kernels  # noqa: E402
from roofline.parse import diagnostics_for, parse_input  # noqa: E402
from roofline.schemas import write_table  # noqa: E402

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k launches / 1,000 kernels")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
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
    cmd = [PY, "-m", "roofline.report", "--kernels", str(tables["kernels"]), "--ceilings", str(tables["ceilings"]),
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
        ["report job (python -m roofline.report)", f"{report_run.wall_s:.1f} s", "", gb(report_run.max_proc_rss), ""],
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
