"""roofline.jobs.server and roofline.jobs.client: jobs handed to a warm server run as they would in their own process.

Every test runs real processes: ``python -m roofline.jobs`` as a rule's shell command runs it,
and the server it starts. Each test has its own socket directory (``XDG_RUNTIME_DIR``), and its
servers are stopped when it ends."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from jobs.test_runner import full_tmpfs  # noqa: F401 - a fixture: a tiny tmpfs, already full
from roofline.jobs import client

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "data" / "examples" / "textbook.yaml"

pytestmark = pytest.mark.skipif(not client.usable({}), reason="the job server is for Linux only")


@pytest.fixture
def runtime():
    """A short private socket directory (a Unix socket path has ~100 characters at most), and the
    environment of a job that uses it; the servers started under it are stopped at the end."""
    base = Path(tempfile.mkdtemp(prefix="rj", dir="/tmp"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_RUNTIME_DIR": str(base), "ROOFLINE_JOB_SERVER_IDLE": "20"}
    env.pop("ROOFLINE_JOB_SERVER", None)
    for name in (*client.BATCH_JOB_ENV, *client.CONTAINER_ENV):
        env.pop(name, None)
    yield base, env
    for pid in _servers(base):
        os.kill(pid, signal.SIGTERM)
    shutil.rmtree(base, ignore_errors=True)


def _servers(base: Path) -> list[int]:
    """The server processes listening under ``base``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"roofline.jobs.server" in command and (any(str(base).encode() in part for part in command)
                                                      or _environment_names(entry, base)):
                pids.append(int(entry.name))
    return pids


def _environment_names(process: Path, base: Path) -> bool:
    """Whether the process's environment has ``base`` as its socket directory (a server started with
    ``--start`` finds its socket from there)."""
    try:
        return f"XDG_RUNTIME_DIR={base}".encode() in (process / "environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _job(cwd: Path, env: dict, *argv: str, importtime: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "roofline.jobs", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


def _parse_argv(app: str) -> list[str]:
    return ["parse", f"logs/parse/{app}.log", f"--input={EXAMPLE}", f"--app={app}", "--kind=what-if", "--device=",
            "--problem=", f"--output=data/counters/{app}.parquet", f"--diagnostics=data/diagnostics/{app}.parquet"]


def _wait_for_server(cwd: Path, env: dict, shell: bool = False) -> Path:
    path = _where(cwd, env, shell)
    deadline = time.monotonic() + 60
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"no server listening at {path} a minute after the first job")
        time.sleep(0.1)
    return path


def _where(cwd: Path, env: dict, shell: bool = False) -> Path:
    """The socket of the jobs started in ``cwd`` with ``env`` (by bash: ``shell``), as their
    interpreter computes it."""
    command = [sys.executable, "-m", "roofline.jobs.server", "--where"]
    if shell:
        command = ["bash", "-c", "umask 022 && exec " + " ".join(command)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=True, cwd=cwd)
    return Path(result.stdout.strip())


def _imported_pandas(result: subprocess.CompletedProcess, log: Path) -> bool:
    """Whether the job's own process imported pandas (``-X importtime`` writes to descriptor 2,
    which is the job's log once the stage runs)."""
    text = result.stderr + (log.read_text() if log.exists() else "")
    return any(line.rstrip().endswith("| pandas") for line in text.splitlines())


def test_a_job_through_the_server_writes_what_its_own_process_writes(runtime, tmp_path):
    base, env = runtime
    alone, served = tmp_path / "alone", tmp_path / "served"
    alone.mkdir(), served.mkdir()

    first = _job(alone, {**env, "ROOFLINE_JOB_SERVER": "off"}, *_parse_argv("textbook"))
    assert first.returncode == 0, first.stderr
    probe = _job(alone, {**env, "ROOFLINE_JOB_SERVER": "off"}, *_parse_argv("probe"), importtime=True)
    assert _imported_pandas(probe, alone / "logs/parse/probe.log")  # what the check below would see
    assert not _servers(base)  # off: no server started

    warm_up = _job(served, env, *_parse_argv("warm_up"))  # no server yet: runs itself and starts one
    assert warm_up.returncode == 0, warm_up.stderr
    _wait_for_server(served, env)
    second = _job(served, env, *_parse_argv("textbook"))
    assert second.returncode == 0, second.stderr
    probe = _job(served, env, *_parse_argv("probe"), importtime=True)
    assert probe.returncode == 0, probe.stderr
    # the job's own process imported no pandas: the server's child did the work
    assert not _imported_pandas(probe, served / "logs/parse/probe.log")

    for table in ("counters", "diagnostics"):
        pd.testing.assert_frame_equal(pd.read_parquet(served / "data" / table / "textbook.parquet"),
                                      pd.read_parquet(alone / "data" / table / "textbook.parquet"))
    assert (served / "logs/parse/textbook.log").read_text() == (alone / "logs/parse/textbook.log").read_text()


def test_exit_status_log_and_stderr_are_the_jobs(runtime, tmp_path, full_tmpfs):  # noqa: F811
    base, env = runtime
    assert _job(tmp_path, env, *_parse_argv("warm_up")).returncode == 0
    _wait_for_server(tmp_path, env)

    bad = _job(tmp_path, env, "parse", "logs/parse/bad.log", "--no-such-option", importtime=True)
    assert not _imported_pandas(bad, tmp_path / "logs/parse/bad.log")
    assert bad.returncode == 2  # argparse's, from the server's child
    usage = (tmp_path / "logs/parse/bad.log").read_text()
    assert "roofline.jobs parse: error: the following arguments are required: --input" in usage

    # a log on a full disk: the one line on the job's own stderr, and status 75
    log = full_tmpfs / "logs" / "status.log"
    failed = _job(tmp_path, env, "status", str(log), "--output=status.json", importtime=True)
    assert not _imported_pandas(failed, log)
    assert failed.returncode == 75
    assert f"roofline: cannot write {log}: No space left on device" in failed.stderr


def _refused_argv(app: str) -> list[str]:
    """A parse job that records the error it is given (one line in its log) instead of reading."""
    return [*_parse_argv(app)[:-3], f"--problem={app}: refused", *_parse_argv(app)[-2:]]


def _workers(server: int) -> list[int]:
    """The server's workers (its child processes), after the job's own process has ended."""
    return sorted(_children(server))


def test_jobs_run_one_after_another_in_one_worker_each_as_in_its_own_process(runtime, tmp_path):
    """A worker runs the next job after one that succeeded: each job's outputs and log are what
    its own process writes (no logging handler, warning or descriptor of the job before it), and
    its standard streams close when it ends, though the worker lives on."""
    base, env = runtime
    alone, served = tmp_path / "alone", tmp_path / "served"
    alone.mkdir(), served.mkdir()
    apps = ["first", "second", "third"]
    for app in apps:
        assert _job(alone, {**env, "ROOFLINE_JOB_SERVER": "off"}, *_refused_argv(app)).returncode == 0
    assert _job(served, env, *_parse_argv("warm_up")).returncode == 0
    _wait_for_server(served, env)
    [server] = _servers(base)
    ran_in = []
    for app in apps:
        job = subprocess.Popen([sys.executable, "-m", "roofline.jobs", *_refused_argv(app)], cwd=served, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert job.wait(timeout=120) == 0
        job.communicate(timeout=10)  # its streams reach their end with the job, not with the worker
        ran_in.append(_workers(server))
        held = [os.readlink(f"/proc/{pid}/fd/{d}") for pid in ran_in[-1] for d in os.listdir(f"/proc/{pid}/fd")
                if int(d) > 2]
        assert [h for h in held if not h.startswith("socket:")] == []  # nothing of the job's left open
    assert len(ran_in[0]) == 1 and ran_in == [ran_in[0]] * 3  # one worker, still there, ran all three
    for app in apps:
        for table in ("counters", "diagnostics"):
            pd.testing.assert_frame_equal(pd.read_parquet(served / "data" / table / f"{app}.parquet"),
                                          pd.read_parquet(alone / "data" / table / f"{app}.parquet"))
        log = (served / f"logs/parse/{app}.log").read_text()
        assert log == (alone / f"logs/parse/{app}.log").read_text() == f"ERROR roofline.parse: {app}: refused\n"
    deadline = time.monotonic() + 30
    while _workers(server):  # a worker waits a moment for a next job, not as long as its server
        assert time.monotonic() < deadline, "an idle worker never ends"
        time.sleep(0.1)
    assert _servers(base) == [server]


def _chain_argv(app: str) -> list[list[str]]:
    """One app through four different stages, as the rules' shell commands run them."""
    ceilings = "data/ceilings/devices.parquet"
    return [
        _parse_argv(app),
        ["ceilings", "logs/ceilings/ceilings.log", "--counters", f"data/counters/{app}.parquet",
         f"--catalog={REPO / 'roofline' / 'data' / 'gpus.yaml'}", "--measured=", "--policy=report,datasheet",
         "--device-policy={}", "--overrides={}", "--margin=0.25", f"--ceilings={ceilings}",
         "--ceilings-diagnostics=data/diagnostics/devices.ceilings.parquet"],
        ["classify_app", f"logs/classify_app/{app}.log", f"--app={app}", f"--counters=data/counters/{app}.parquet",
         f"--ceilings={ceilings}", "--low-roof-fraction=0.1", "--above-roof-tolerance=0.02", "--annotations=[]",
         f"--classified=data/classified/{app}.parquet", f"--kernels=data/kernels/{app}.parquet", "--diagnostics",
         f"data/diagnostics/{app}.parquet", f"--page=reports/apps/{app}.html", "--title=Roofline summary",
         f"--source={EXAMPLE.name}", "--summary=reports/summary.html"],
        ["report", "logs/report/summary.log", "--kernels", f"data/kernels/{app}.parquet", f"--ceilings={ceilings}",
         "--diagnostics", f"data/diagnostics/{app}.parquet", "data/diagnostics/devices.ceilings.parquet",
         "--output=reports/summary.html", "--title=Roofline summary", "--top-kernels=200", "--apps", app,
         f'--sources={{"{app}": "{EXAMPLE.name}"}}', "--input-problems=[]", "--series={}",
         "--compare-dir=reports/compare", "--tonight-script=reports/tonight.js"],
    ]


def _outputs(folder: Path) -> dict[str, object]:
    """Every file a chain wrote: Parquet as its table (schema, values and metadata), the rest as bytes."""
    import pyarrow.parquet as pq

    return {path.relative_to(folder).as_posix(): pq.read_table(path) if path.suffix == ".parquet" else path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_different_stages_in_one_worker_write_what_fresh_processes_write(runtime, tmp_path):
    """The reuse rule (roofline/jobs/worker.py): a worker that ran one stage runs another as a fresh
    process would. Parse, ceilings, the app's classification and page, and the report run one after
    another in one worker; every table, page and log is what four processes of their own write."""
    base, env = runtime
    alone, served = tmp_path / "alone", tmp_path / "served"
    for folder in (alone, served):
        folder.mkdir()
        shutil.copy(EXAMPLE, folder / EXAMPLE.name)
    for argv in _chain_argv("textbook"):
        result = _job(alone, {**env, "ROOFLINE_JOB_SERVER": "off"}, *argv)
        assert result.returncode == 0, (argv[0], result.stderr)
    assert _job(served, env, *_parse_argv("warm_up")).returncode == 0  # starts the server
    _wait_for_server(served, env)
    [server] = _servers(base)
    ran_in = []
    for argv in _chain_argv("textbook"):
        result = _job(served, env, *argv)
        assert result.returncode == 0, (argv[0], result.stderr)
        ran_in.append(_workers(server))
    assert len(ran_in[0]) == 1 and all(workers[:1] == ran_in[0] for workers in ran_in[:3]), ran_in
    expected = _outputs(alone)
    got = {name: content for name, content in _outputs(served).items() if "warm_up" not in name}
    assert sorted(got) == sorted(expected)
    for name, content in expected.items():
        same = got[name].equals(content, check_metadata=True) if name.endswith(".parquet") else got[name] == content
        assert same, name


def test_a_worker_runs_no_job_after_one_that_failed_or_that_left_it_large(runtime, tmp_path):
    base, env = runtime
    assert _job(tmp_path, env, *_parse_argv("warm_up")).returncode == 0
    _wait_for_server(tmp_path, env)
    [server] = _servers(base)
    assert _job(tmp_path, env, *_parse_argv("a")).returncode == 0
    [worker] = _workers(server)
    assert _job(tmp_path, env, "parse", "logs/parse/bad.log", "--no-such-option").returncode == 2
    assert _workers(server) == []  # the worker that ran the failed job ended with it
    assert _job(tmp_path, env, *_parse_argv("b")).returncode == 0
    [fresh] = _workers(server)
    assert fresh != worker
    small = {**env, "ROOFLINE_JOB_WORKER_RESIDENT_MAX": "1"}  # every worker is over it after a job
    assert _job(tmp_path, small, *_parse_argv("warm_up_small")).returncode == 0
    _wait_for_server(tmp_path, small)
    [other] = [pid for pid in _servers(base) if pid not in (server, fresh)]
    for app in ("c", "d"):
        assert _job(tmp_path, small, *_parse_argv(app)).returncode == 0
        deadline = time.monotonic() + 30
        while _workers(other):
            assert time.monotonic() < deadline, "a worker over its memory limit waits for another job"
            time.sleep(0.05)


def _found_in_a_forked_process(check) -> dict:
    """What ``check()`` returns (a dict, as JSON), run in a forked process: a worker's place, which ends
    without the test process's exit handlers ({} where ``check`` raised)."""
    import json

    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:
        found = {}
        try:
            signal.alarm(30)  # a check that hangs ends the child, not the test
            found = check()
        finally:
            os.write(writing, json.dumps(found).encode())
            os._exit(0)
    os.close(writing)
    with os.fdopen(reading) as pipe:
        found = json.loads(pipe.read())
    os.waitpid(pid, 0)
    return found


def test_between_two_jobs_a_worker_puts_back_what_a_job_changed(tmp_path):
    """What a job may change in its worker, changed by hand in a forked process: put back by the
    worker before it waits for the next job."""
    import logging
    import socket
    import warnings

    from roofline.jobs import worker as job_worker

    def check() -> dict:
        channel, _ = socket.socketpair()
        between = job_worker._Between(channel.fileno(), set())
        before = (list(logging.getLogger().handlers), logging.getLogger().level, list(warnings.filters),
                  sys.stdout, sys.stderr)
        logging.basicConfig(level=logging.DEBUG, stream=open(tmp_path / "job.log", "w"))  # noqa: SIM115
        logging.getLogger("roofline.parse").setLevel(logging.ERROR)
        warnings.simplefilter("error")
        sys.stderr = open(tmp_path / "stderr.txt", "w")  # noqa: SIM115
        left_open = os.open(tmp_path / "left-open.txt", os.O_WRONLY | os.O_CREAT)
        os.chdir(tmp_path)
        between.restore()
        after = (list(logging.getLogger().handlers), logging.getLogger().level, list(warnings.filters),
                 sys.stdout, sys.stderr)
        return {"same": [a == b for a, b in zip(before, after, strict=True)],
                "parse level": logging.getLogger("roofline.parse").level,
                "left open": os.path.exists(f"/proc/self/fd/{left_open}"),
                "channel open": os.path.exists(f"/proc/self/fd/{channel.fileno()}"),
                "cwd": os.getcwd(), "streams": [os.readlink(f"/proc/self/fd/{n}") for n in (0, 1, 2)]}

    assert _found_in_a_forked_process(check) == {
        "same": [True] * 5, "parse level": logging.NOTSET, "left open": False, "channel open": True, "cwd": "/",
        "streams": [os.devnull] * 3}


def test_a_worker_runs_another_job_beside_the_idle_hashing_thread_only(tmp_path):
    """In a forked process (a worker's place): after a parse's hash, its idle hashing thread leaves
    the worker reusable; a thread a job left running does not (hand-made bytes hashed)."""
    import socket
    import threading

    from roofline.jobs import worker as job_worker
    from roofline.parse.input_hash import hash_beside

    path = tmp_path / "data.bin"
    path.write_bytes(b"roofline" * 10_000)

    def check() -> dict:
        job_worker.RESIDENT_MAX = 2**62  # the test process's size is not what is tested
        between = job_worker._Between(socket.socketpair()[0].fileno(), set())
        found = {"nothing": between.reusable()}
        hash_beside(path)()
        found["after a hash"] = between.reusable()
        release = threading.Event()
        left = threading.Thread(target=release.wait)
        left.start()
        found["a thread left running"] = between.reusable()
        release.set()
        left.join()
        found["after it ended"] = between.reusable()
        found["hashing threads"] = [t.name for t in threading.enumerate()].count("roofline-hash")
        return found

    assert _found_in_a_forked_process(check) == {
        "nothing": True, "after a hash": True, "a thread left running": False, "after it ended": True,
        "hashing threads": 1}


def _shell_job(cwd: Path, env: dict, before: str, *argv: str) -> subprocess.CompletedProcess:
    """The job as a bash command line (bash sets variables of its own: the same for every job)."""
    options = [a for a in argv if a in ("-X", "importtime")]
    job = " ".join(a for a in argv if a not in options)
    line = f"{before} && exec {sys.executable} {' '.join(options)} -m roofline.jobs {job}"
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


def test_the_job_runs_in_its_directory_with_its_umask_and_environment(runtime, tmp_path):
    base, env = runtime
    assert _shell_job(tmp_path, env, "umask 022", *_parse_argv("warm_up")).returncode == 0
    path = _wait_for_server(tmp_path, env, shell=True)
    [server] = _servers(base)
    assert os.readlink(f"/proc/{server}/cwd") == "/"  # the server holds no job's directory
    # another environment or directory is another server (what a job imports could differ)...
    assert _where(tmp_path, {**env, "ROOFLINE_TEST_MARK": "1"}, shell=True) != path
    assert _where(tmp_path / "data", env, shell=True) != path
    # ...but not Snakemake's per-rule thread counts
    assert _where(tmp_path, {**env, "OMP_NUM_THREADS": "7", "OPENBLAS_NUM_THREADS": "7"}, shell=True) == path
    served = _shell_job(tmp_path, {**env, "OMP_NUM_THREADS": "3"}, "umask 077", "-X", "importtime",
                        *_parse_argv("textbook"))
    assert served.returncode == 0 and not _imported_pandas(served, tmp_path / "logs/parse/textbook.log")
    output = tmp_path / "data/counters/textbook.parquet"
    assert output.exists()
    assert output.stat().st_mode & 0o077 == 0  # written under the job's umask, not the server's
    assert (tmp_path / "data/counters/warm_up.parquet").stat().st_mode & 0o077 != 0


def test_a_cancelled_job_stops_its_child(runtime, tmp_path):
    """Snakemake cancels a job by signalling its process: the server then stops the child."""
    base, env = runtime
    assert _job(tmp_path, env, *_parse_argv("warm_up")).returncode == 0
    _wait_for_server(tmp_path, env)
    server = _servers(base)[0]
    fifo = tmp_path / "never-written.yaml"
    os.mkfifo(fifo)  # the child blocks opening it: a job that does not end on its own
    argv = [a if not a.startswith("--input=") else f"--input={fifo}" for a in _parse_argv("stuck")]
    job = subprocess.Popen([sys.executable, "-m", "roofline.jobs", *argv], cwd=tmp_path, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    writer = _opened_for_reading(fifo)
    [child] = _children(server)
    _wait_until_held(child, fifo)
    assert not _holds(job.pid, fifo)  # the child reads the input, not the job's own process
    job.send_signal(signal.SIGTERM)
    job.wait(timeout=30)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists() and _children(server):
        assert time.monotonic() < deadline, "the cancelled job's child still runs"
        time.sleep(0.05)
    os.close(writer)


def test_edited_code_gets_a_new_server(tmp_path):
    """A copy of the package: editing one of its files changes the socket, so no server started
    before the edit runs a job after it."""
    copy = tmp_path / "workflow"
    shutil.copytree(REPO / "roofline", copy / "roofline", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(copy)}
    before = _where(tmp_path, env)
    assert _where(tmp_path, env) == before and before.name.endswith(".sock")
    module = copy / "roofline" / "classify" / "launches.py"
    module.write_text(module.read_text() + "\n# edited\n")
    assert _where(tmp_path, env) != before
    assert _where(tmp_path, {**env, "ROOFLINE_JOB_SERVER": "off"}) == Path("none")


def test_where_the_server_is_not_used(tmp_path):
    assert client.usable({})
    assert not client.usable({"ROOFLINE_JOB_SERVER": "off"})
    for name in ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID"):
        assert not client.usable({name: "123"})  # a batch job's processes end with it
    for name in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"):
        assert not client.usable({name: "/images/roofline.sif"})  # a job's container is its own


def test_a_socket_directory_others_can_enter_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    directory = tmp_path / f"roofline-jobs-{os.getuid()}"
    directory.mkdir(mode=0o700)
    assert client.socket_path("k") == str(directory / "k.sock")
    directory.chmod(0o777)
    assert client.socket_path("k") is None
    (tmp_path / ("x" * 120)).mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("x" * 120)))
    assert client.socket_path("k") is None  # too long for a Unix socket: jobs run in their own process


def test_a_server_that_dies_during_a_job_fails_that_job_saying_so(runtime, tmp_path):
    base, env = runtime
    assert _job(tmp_path, env, *_parse_argv("warm_up")).returncode == 0
    _wait_for_server(tmp_path, env)
    [server] = _servers(base)
    fifo = tmp_path / "never-written.yaml"
    os.mkfifo(fifo)
    argv = [a if not a.startswith("--input=") else f"--input={fifo}" for a in _parse_argv("stuck")]
    job = subprocess.Popen([sys.executable, "-m", "roofline.jobs", *argv], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer = _opened_for_reading(fifo)
    [child] = _children(server)
    _wait_until_held(child, fifo)
    assert not _holds(job.pid, fifo)  # the child reads the input, not the job's own process
    os.kill(server, signal.SIGKILL)
    _, stderr = job.communicate(timeout=30)
    assert job.returncode == 1
    assert "the job server running this job stopped before it ended; rerun the job" in stderr
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists() and "zombie" not in _state(child):
        assert time.monotonic() < deadline, "the child of the killed server goes on with the job"
        time.sleep(0.05)
    os.close(writer)


def _opened_for_reading(fifo: Path) -> int:
    """The write end of ``fifo`` once a job has opened it (the job then blocks reading): a served
    job's child only gets that far after telling the job it was accepted."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader yet
            assert time.monotonic() < deadline, "no job opened its input"
            time.sleep(0.05)


def _wait_until_held(pid: int, path: Path) -> None:
    """Until ``pid`` has ``path`` open: a reader's descriptor appears once its open returns, which
    may be just after the writer's open succeeded."""
    deadline = time.monotonic() + 30
    while not _holds(pid, path):
        assert time.monotonic() < deadline, f"process {pid} never opened {path}"
        time.sleep(0.02)


def _holds(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (its other descriptors may close while we look)."""
    try:
        entries = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for entry in entries:
        with contextlib.suppress(OSError):
            if os.readlink(entry) == str(path):
                return True
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "gone"


def test_a_stale_socket_is_replaced(runtime, tmp_path):
    """A server killed outright leaves its socket file: the next job runs itself and starts a
    server that listens there again."""
    base, env = runtime
    path = _where(tmp_path, env)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    import socket

    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens
    first = _job(tmp_path, env, *_parse_argv("first"))
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "data/counters/first.parquet").exists()
    deadline = time.monotonic() + 60
    while not _servers(base):
        assert time.monotonic() < deadline, "no server started beside the stale socket"
        time.sleep(0.1)
    second = _job(tmp_path, env, *_parse_argv("second"), importtime=True)
    deadline = time.monotonic() + 60
    while _imported_pandas(second, tmp_path / "logs/parse/second.log"):  # until the new server listens
        assert time.monotonic() < deadline, "the new server never took a job"
        time.sleep(0.2)
        second = _job(tmp_path, env, *_parse_argv("second"), importtime=True)
    assert second.returncode == 0


def test_a_child_that_ends_wakes_the_server_and_its_job_hears_at_once():
    """The server hears a child end from its pidfd, not at its next poll: the wait below would
    last a minute otherwise. Reaping sends the job its exit status and closes the descriptor."""
    import selectors
    import socket

    from roofline.jobs import server as job_server

    selector = selectors.DefaultSelector()
    pid = os.fork()
    if pid == 0:
        time.sleep(0.2)
        os._exit(7)
    ending = job_server.watch_ending(selector, pid)
    if ending is None:
        os.waitpid(pid, 0)
        pytest.skip("this system has no pidfd (Linux 5.3 and later): the server reaps at its poll")
    events = selector.select(timeout=60)
    assert [key.data for key, _ in events] == [job_server.ENDED]
    server_end, job_end = socket.socketpair()
    selector.register(server_end, selectors.EVENT_READ, pid)
    children, endings = {pid: server_end}, {pid: ending}
    job_server._reap(children, selector, endings)
    assert children == {} and endings == {}
    assert client.STATUS.unpack(job_end.recv(client.STATUS.size))[0] == 7
    with pytest.raises(OSError):
        os.fstat(ending)  # closed once reaped
    assert selector.get_map() == {}


def test_a_request_goes_over_with_its_descriptors_and_nothing_else_is_taken_for_one():
    import marshal
    import socket

    job_end, server_end = socket.socketpair()
    request = {"argv": ["parse", "logs/a.log"], "cwd": "/tmp", "env": {"A": "1"}, "umask": 0o22}
    client.send_request(job_end, request, [0, 1, 2])
    data, descriptors, _, _ = socket.recv_fds(server_end, 1 << 16, 3)
    assert client.read_request(data, server_end) == request and len(descriptors) == 3
    for descriptor in descriptors:
        os.close(descriptor)
    import threading

    large = {**request, "env": {"BIG": "x" * 4_000_000}}  # more than a socket buffer takes at once
    sender = threading.Thread(target=client.send_request, args=(job_end, large, [0, 1, 2]))
    sender.start()
    data, descriptors, _, _ = socket.recv_fds(server_end, 1 << 16, 3)
    assert client.read_request(data, server_end) == large
    sender.join()
    for descriptor in descriptors:
        os.close(descriptor)
    for payload in (marshal.dumps(["parse"]), marshal.dumps({"argv": []}), b"\x00garbage"):
        with pytest.raises(ValueError):
            client.read_request(client.LENGTH.pack(len(payload)) + payload, server_end)


def test_a_job_waits_for_a_server_that_is_still_starting_instead_of_running_itself(runtime, tmp_path):
    """The first job starts a server and runs itself; a job arriving while that server imports its
    modules waits for it (not paying the imports too), and a marker naming a dead process or none
    makes a job run itself at once."""
    base, env = runtime
    first = _job(tmp_path, env, *_parse_argv("first"))  # no server: runs itself, starts one
    assert first.returncode == 0, first.stderr
    socket = _where(tmp_path, env)
    marker = Path(client.starting_marker(str(socket)))
    started = time.monotonic()
    while not socket.exists() and time.monotonic() - started < 60:
        assert marker.exists() or socket.exists()  # the marker stays until the server listens
        time.sleep(0.01)
    assert socket.exists() and not marker.exists()
    for pid in _servers(base):  # a fresh start: the next job arrives while the server imports
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while _servers(base) and time.monotonic() < deadline:
        time.sleep(0.05)
    starter = _job(tmp_path, env, *_parse_argv("starter"))
    assert starter.returncode == 0, starter.stderr
    assert marker.exists() or socket.exists()
    waiting = _job(tmp_path, env, *_parse_argv("waiting"), importtime=True)
    assert waiting.returncode == 0, waiting.stderr
    assert not _imported_pandas(waiting, tmp_path / "logs/parse/waiting.log")  # the server's child ran it
    assert (tmp_path / "data/counters/waiting.parquet").exists()

    for pid in _servers(base):
        os.kill(pid, signal.SIGTERM)
    while _servers(base) and time.monotonic() < deadline:
        time.sleep(0.05)
    marker.write_text("999999999")  # no such process
    begun = time.monotonic()
    alone = _job(tmp_path, env, *_parse_argv("alone"), importtime=True)
    assert alone.returncode == 0, alone.stderr
    assert _imported_pandas(alone, tmp_path / "logs/parse/alone.log")  # ran itself, without waiting
    assert time.monotonic() - begun < client.STARTING_WAIT_SECONDS + 5


def _thp_enabled(pid: int | str) -> str:
    """The process's THP_enabled line in /proc (Linux 5.0+); '' where the kernel does not show it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("THP_enabled:"):
            return line.split(":", 1)[1].strip()
    return ""


def test_jobs_and_their_server_run_without_transparent_huge_pages(runtime, tmp_path):
    """A job that runs itself turns huge pages off, the server it starts (and so its workers) keep
    that, and ROOFLINE_HUGE_PAGES=on leaves them on."""
    base, env = runtime
    if not _thp_enabled("self"):
        pytest.skip("this kernel does not show THP_enabled in /proc/PID/status")
    probe = ("from roofline.jobs import client; off = client.without_huge_pages(); "
             "print(off, [l for l in open('/proc/self/status') if l.startswith('THP_enabled')][0])")
    off = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert off.stdout.split() == ["True", "THP_enabled:", "0"]
    kept = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          env={**env, "ROOFLINE_HUGE_PAGES": "on"})
    assert kept.stdout.split() == ["False", "THP_enabled:", "1"]

    fifo = tmp_path / "held.yaml"
    os.mkfifo(fifo)  # the job blocks reading it: its process can be looked at while it runs
    argv = [a if not a.startswith("--input=") else f"--input={fifo}" for a in _parse_argv("first")]
    first = subprocess.Popen([sys.executable, "-m", "roofline.jobs", *argv], cwd=tmp_path, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # no server: runs itself
    writer = _opened_for_reading(fifo)
    _wait_until_held(first.pid, fifo)
    assert _thp_enabled(first.pid) == "0"
    first.kill()  # it started the server before it ran the stage
    first.wait(timeout=30)
    os.close(writer)
    _wait_for_server(tmp_path, env)  # the server it started, and so its workers
    servers = _servers(base)
    assert servers and all(_thp_enabled(pid) == "0" for pid in servers)


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _command_line(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


@pytest.mark.slow
def test_a_workflow_run_has_one_server_its_first_job_started(runtime, tmp_path):
    """Reading the workflow starts nothing: a dry run leaves no server. A run's first job starts the
    server and the later jobs find that one, not one each."""
    from conftest import snakemake_command

    base, env = runtime
    (tmp_path / "inputs").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "inputs" / "textbook.yaml")
    (tmp_path / "config.yaml").write_text("# hand-made test config\ninputs: [inputs/*]\napps: {}\n")
    dry = subprocess.run(snakemake_command(tmp_path, "--cores", "2", "-n"), capture_output=True, text=True,
                         env=env, timeout=300)
    assert dry.returncode == 0, dry.stderr[-3000:]
    time.sleep(1)
    assert not _servers(base)
    assert not client.starting_server(str(_where(tmp_path, env, shell=True)))

    run = subprocess.run(snakemake_command(tmp_path, "--cores", "2"), capture_output=True, text=True, env=env,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "reports" / "summary.html").exists()
    found = _servers(base)
    servers = [pid for pid in found if _parent(pid) not in found]  # not their workers
    assert len(servers) == 1, [_command_line(pid) for pid in servers]
