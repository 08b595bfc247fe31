"""Run every benchmark in turn; each prints its figures and rewrites its block of README.md.

    .venv/bin/python benchmarks/run_all.py            # full sizes (about 30-40 min on 2 cores)
    .venv/bin/python benchmarks/run_all.py --quick    # small sizes (about 5 min)
    .venv/bin/python benchmarks/run_all.py --only bench_parse bench_nersc

Generated data and work folders go to $ROOFLINE_BENCH_TMP (default /tmp/roofline-bench); the first
full run generates about 3 GB there (200 apps x 2,000 launches and two 100k-launch CSVs) and later
runs reuse it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ["bench_parse", "bench_nersc", "bench_report", "bench_incremental", "bench_workflow",
              "bench_decide", "bench_export"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", choices=BENCHMARKS)
    parser.add_argument("--no-record", action="store_true", help="print only; leave README.md alone")
    args = parser.parse_args(argv)
    failed = []
    for name in args.only or BENCHMARKS:
        extra = [*(["--quick"] if args.quick else []), *(["--no-record"] if args.no_record else [])]
        print(f"== {name} {' '.join(extra)}", flush=True)
        start = time.perf_counter()
        result = subprocess.run([sys.executable, str(HERE / f"{name}.py"), *extra], cwd=HERE.parent)
        print(f"== {name}: exit {result.returncode} after {time.perf_counter() - start:.0f} s", flush=True)
        if result.returncode != 0:
            failed.append(name)
    if failed:
        print(f"goals not met or errors in: {', '.join(failed)} (see their output and benchmarks/README.md)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
