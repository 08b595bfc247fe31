"""What ncu's own log lines in a file say went wrong, and the fix for it.

ncu writes its log (``==PROF==``, ``==WARNING==``, ``==ERROR==`` lines) to the same stream as its CSV
output, so a capture that failed leaves a "CSV export" holding the log and no table. Such a file is
not a file of the wrong format: the fix lies in the ncu run, and the log says what went wrong.
:func:`log_problem` quotes ncu's own words (its first error, else its warning that no kernel was
profiled) and adds the fix that usually applies; an error it knows no fix for is still quoted.
"""

from __future__ import annotations

import re

# The ncu options that select which launches are profiled: when none matched, ncu profiles nothing.
KERNEL_FILTER_FLAGS = (
    "the kernel filters of the ncu run (--kernel-name/-k, --kernel-name-base, --kernel-id, --nvtx-include), "
    "its launch window (--launch-skip/-s, --launch-count/-c: a skip past the last launch profiles nothing), "
    "whether the application launched a kernel at all (did it run to the end without ncu?), and "
    "--target-processes all when the kernels run in a child process (a Python launcher, mpirun, a shell script)"
)
NO_KERNEL_FIX = f"check {KERNEL_FILTER_FLAGS}, then profile again"
_LOG_LINE = re.compile(r"^==(PROF|WARNING|ERROR|WARN|INFO)==\s*(.*)$")
_NO_KERNEL = re.compile(r"no kernels were profiled", re.IGNORECASE)
# ncu error text -> the fix that usually applies; the first pattern that matches an error line wins.
_ERROR_FIXES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"ERR_NVGPUCTRPERM|permission to access NVIDIA GPU Performance Counters", re.IGNORECASE),
        "the user may not read the GPU's performance counters: profile as root (sudo) or with CAP_SYS_ADMIN "
        "(or CAP_PERFMON from driver R565), start a container with --cap-add=SYS_ADMIN, or have an "
        "administrator allow profiling for all users (`options nvidia NVreg_RestrictProfilingToAdminUsers=0` "
        "in /etc/modprobe.d/, then reload the driver or reboot); see https://developer.nvidia.com/ERR_NVGPUCTRPERM",
    ),
    (
        re.compile(r"driver resource was unavailable|concurrently collecting", re.IGNORECASE),
        "another tool holds the GPU's counters (DCGM, a second ncu or nsys): pause it (`dcgmi profile --pause`) "
        "or wait for it, then profile again",
    ),
    (
        re.compile(r"application returned an error code|application (terminated|crashed|was killed)", re.IGNORECASE),
        "the application failed under ncu: run it without ncu to see why, fix it, then profile again",
    ),
    (
        re.compile(r"unknown option|unrecognized option|invalid (value|argument|option)", re.IGNORECASE),
        "the ncu command line is wrong: check the option against `ncu --help`, then profile again",
    ),
    (
        re.compile(r"invalid metric|metric.*(not found|not available|unknown|invalid)|failed to find metric", re.I),
        "a metric or section the command asks for does not exist on this GPU or ncu version: check the names "
        "with `ncu --query-metrics` / `ncu --list-sections`, then profile again",
    ),
    (
        re.compile(r"not supported|unsupported", re.IGNORECASE),
        "this ncu version cannot profile this GPU (or this mode): use an Nsight Compute release that supports "
        "the GPU, then profile again",
    ),
    (
        re.compile(r"out of memory|no space left", re.IGNORECASE),
        "the machine ran out of memory or disk during profiling: free some, or profile fewer launches "
        "(--launch-count), then profile again",
    ),
)


def log_lines(lines: list[str]) -> list[tuple[str, str]]:
    """ncu's log lines among ``lines``, as (level, text): ``('ERROR', 'ERR_NVGPUCTRPERM - ...')``."""
    found = []
    for line in lines:
        match = _LOG_LINE.match(line.strip().strip('"'))
        if match:
            found.append((match.group(1), match.group(2).strip()))
    return found


def log_problem(lines: list[str]) -> str | None:
    """What ncu's log among ``lines`` says went wrong and how to fix it, or None when ``lines`` hold no
    ncu error and no "No kernels were profiled" warning."""
    log = log_lines(lines)
    errors = [text for level, text in log if level == "ERROR"]
    no_kernel = any(_NO_KERNEL.search(text) for level, text in log if level in ("WARNING", "WARN"))
    if errors:
        fix = next((fix for pattern, fix in _ERROR_FIXES for text in errors if pattern.search(text)), None)
        quoted = _quote(errors[0]) + (f" (and {len(errors) - 1} more ==ERROR== line(s))" if len(errors) > 1 else "")
        profiled = "; it profiled no kernel" if no_kernel else ""
        return f"the file holds ncu's log, which reports an error: {quoted}{profiled}; " + (
            fix or "fix what it reports, then profile again"
        )
    if no_kernel:
        return f"ncu profiled no kernel (its log says 'No kernels were profiled.'): {NO_KERNEL_FIX}"
    return None


def _quote(text: str, width: int = 240) -> str:
    """ncu's text in quotes, cut at ``width`` characters."""
    return repr(text if len(text) <= width else text[: width - 1] + "…")


# Exports of other NVIDIA profilers, which hold kernel times but not the counters a roofline needs:
# (what tells them apart, what they are).
_FOREIGN: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Time \(%\)|Total Time \(ns\)|\bNum Calls\b"), "an Nsight Systems (nsys) statistics export"),
    (re.compile(r"^==\d+== |\bInvocations\b"), "an nvprof export (CUDA's legacy profiler)"),
)


def foreign_export(lines: list[str]) -> str | None:
    """What another profiler's export among ``lines`` is and how to get the counters instead, or None."""
    for pattern, what in _FOREIGN:
        if any(pattern.search(line) for line in lines[:50]):
            return (
                f"it looks like {what}, which holds kernel times but not the hardware counters a roofline "
                "needs: profile the application with Nsight Compute (`ncu --set roofline -o <name> <app>`) "
                "and give the .ncu-rep, or its `ncu --import <name>.ncu-rep --csv --page raw` export"
            )
    return None
