"""Tests of roofline.parse.readers.ncu_log: what ncu's log lines (hand-made here, modelled on what ncu prints) say."""

from __future__ import annotations

from roofline.parse.readers.ncu_log import foreign_export, log_lines, log_problem

CONNECTED = "==PROF== Connected to process 40213 (/home/user/vecadd)"
NO_KERNEL = "==WARNING== No kernels were profiled."


def test_log_lines_are_told_from_program_output() -> None:
    lines = ["Final sum = 100", CONNECTED, '"==ERROR== quoted by a CSV writer"', "== not a log line"]
    assert log_lines(lines) == [
        ("PROF", "Connected to process 40213 (/home/user/vecadd)"),
        ("ERROR", "quoted by a CSV writer"),
    ]


def test_no_kernel_points_to_the_filters_and_child_processes() -> None:
    problem = log_problem([CONNECTED, NO_KERNEL])
    assert problem.startswith("ncu profiled no kernel (its log says 'No kernels were profiled.')")
    for flag in ("--kernel-name/-k", "--kernel-name-base", "--launch-skip/-s", "--launch-count/-c", "--nvtx-include",
                 "--target-processes all"):
        assert flag in problem


def test_an_error_wins_over_the_no_kernel_warning() -> None:
    lines = [CONNECTED, "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
             "Performance Counters on the target device 0.", "==ERROR== second", NO_KERNEL]
    problem = log_problem(lines)
    assert problem.startswith("the file holds ncu's log, which reports an error: 'ERR_NVGPUCTRPERM - The user")
    assert "(and 1 more ==ERROR== line(s)); it profiled no kernel; the user may not read" in problem
    assert "--kernel-name" not in problem


def test_the_first_error_with_a_known_fix_gives_the_fix() -> None:
    problem = log_problem(["==ERROR== unknown option '--sett'"])
    assert problem.endswith("the ncu command line is wrong: check the option against `ncu --help`, then profile again")
    assert log_problem(["==ERROR== " + "x" * 500]).count("x") < 300  # long lines are cut


def test_no_log_no_problem() -> None:
    assert log_problem(["a,b", "1,2", CONNECTED, "==PROF== Disconnected from process 40213"]) is None
    assert log_problem([]) is None


def test_other_profilers_exports() -> None:
    nsys = ['"Time (%)","Total Time (ns)","Instances","Avg (ns)","Name"']
    nvprof = ["==12345== NVPROF is profiling process 12345, command: ./a.out", '"Device","Kernel","Invocations"']
    assert "Nsight Systems (nsys)" in foreign_export(nsys)
    assert "nvprof" in foreign_export(nvprof)
    assert foreign_export(["kernel,gpu", "k,X"]) is None
