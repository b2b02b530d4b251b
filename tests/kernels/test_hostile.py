"""Hostile candidates against the judge, on CPU under the Triton interpreter.

Each file in hostile/ is one attack (or fault), written the way a model rewarded for speed might write
it, grouped by the class of hole it goes for: forged verdicts, reaching the judge's state, a tensor
subclass that compares itself, escaping the sandbox, passing a torch computation off as a kernel's,
and weak verification. Every one must be rejected or contained with a clear error kind, and honest
candidates evaluated before and after them must keep their verdicts. The candidates share the helper
kernels in hostile/_kernel.txt; the test bakes paths and pids into some of them, as an attacker that
found them would.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from kernelwright.hardware import EvalConfig, EvalResult, WorkerPool
from kernelwright.hardware.isolation.confine import landlock_abi
from kernelwright.tasks import load_task

HOSTILE = Path(__file__).parent / "hostile"
CANDIDATES = Path(__file__).parent / "candidates"


def hostile(name: str, **replace: object) -> str:
    body = (HOSTILE / name).read_text()
    for key, value in replace.items():
        body = body.replace(key, str(value))
    return (HOSTILE / "_kernel.txt").read_text() + "\n\n" + body


def report(res: EvalResult) -> str:
    """What a self-reporting candidate wrote between REPORT and END in its exception."""
    found = re.search(r"REPORT (.*?) END", res.error or "")
    assert found, res.error
    return found.group(1)


# The candidates are judged by the session's shared pool (tests/kernels/conftest.py), whose judges are
# started from an environment holding a secret (judge_secret); "no hostile candidate took its judge down"
# counts the restarts since this module began.
pytestmark = pytest.mark.usefixtures("restarts_at_start")


@pytest.fixture(scope="module")
def relu_task():
    return load_task(CANDIDATES / "task_relu.py")


@pytest.fixture(scope="module")
def confinement(pool, relu_task) -> dict:
    """What this host confines (an honest candidate's result says): the containment tests below need it."""
    res = pool.evaluate(relu_task, hostile("honest.py"))
    assert res.correct, res.error
    return res.extra["confinement"]


def needs(confinement: dict, what: str) -> None:
    if confinement[what] == "not confined":
        pytest.skip(
            f"this host offers no confinement of the {what} (no namespaces, no Landlock): {confinement}"
        )


def judge_pid(pool: WorkerPool) -> int:
    return pool._workers[0].proc.pid  # type: ignore[union-attr]


def assert_honest_still_judged(pool: WorkerPool, task) -> None:
    ok = pool.evaluate(task, hostile("honest.py"))
    assert ok.correct, ok.error
    wrong = pool.evaluate(task, hostile("honest_wrong.py"))
    assert (wrong.correct, wrong.error_kind) == (False, "mismatch"), wrong.error


# name -> (stage, error kind, text the error must contain)
REJECTED: dict[str, tuple[str, str, str]] = {
    # 1. forged verdicts
    # (caught at once: the runner's own answer to that call is waiting when the judge sends the ping that
    # follows every call, or answers it)
    "forged_reply.py": ("compile", "forbidden", "a forged reply from candidate code"),
    # 2. the judge in the candidate's process
    "patch_judge_modules.py": ("correctness", "mismatch", "outside rtol"),
    # (it walks the frames through sys._getframe under a computed name: a tripwire stops it; nothing in
    # the candidate process would have been worth finding, the mismatch it used to end in)
    "gc_expected.py": ("run", "forbidden", "called sys._getframe"),
    # 3. a tensor subclass deciding its own comparison
    "tensor_subclass.py": ("correctness", "forbidden", "tensor subclass"),
    # 5. runtime evidence instead of source scans
    "getattr_fallback.py": ("run", "torch_fallback", "every compute op the reference runs (aten::relu)"),
    "operator_fallback.py": ("run", "torch_fallback", "does not depend on anything a Triton kernel wrote"),
    "suppress_fallback.py": ("run", "torch_fallback", "does not depend on anything a Triton kernel wrote"),
    "copy_through_kernel.py": ("run", "torch_fallback", "every compute op the reference runs (aten::relu)"),
    "thread_compute.py": ("run", "forbidden", "forward started 1 thread(s)"),
    "thread_left_running.py": ("run", "forbidden", "thread(s) running"),
    "thread_joined_into_buffer.py": ("run", "forbidden", "forward started 1 thread(s)"),
    "thread_from_init.py": ("run", "forbidden", "building ModelNew left"),
    "numpy_into_buffer.py": ("run", "forbidden", "memory changed with no recorded op writing it"),
    "numpy_over_output.py": ("run", "forbidden", "returned by forward"),
    "tensor_from_python_list.py": ("run", "forbidden", "depends on memory that no recorded op wrote"),
    # (a swap keeps every plain sum: the fingerprints are keyed and weigh each position)
    "swap_input_elements.py": ("run", "forbidden", "memory changed with no recorded op writing it"),
    "torch_off_the_recorded_call.py": ("run", "torch_fallback", "launched no Triton kernel"),
    "pop_recorder.py": ("parse", "static_check", "(_python_dispatch)"),
    "pop_recorder_computed.py": ("run", "forbidden", "called torch._C._len_torch_dispatch_stack"),
    "replace_launcher.py": ("compile", "forbidden", "launcher was replaced"),
    # (names the static check cannot read: the candidate process's tripwires)
    "dispatch_stack_computed.py": ("run", "forbidden", "called torch._C._len_torch_dispatch_stack"),
    "cuda_graph_computed.py": ("run", "forbidden", "CUDA graphs are not allowed in a candidate"),
    # 6. verification as documented
    "precomputed_seed_inputs.py": ("correctness", "mismatch", "outside rtol"),
    "fixed_shape.py": ("correctness", "shape_mismatch", "shape [5, 123, 77], expected [3, 81, 51]"),
    "writes_input.py": ("compile", "forbidden", "wrote into input 0"),
    "poison_off.py": ("compile", "forbidden", "switched off the harness's poisoning"),
    "precision_switch.py": ("compile", "forbidden", "changed torch's float32 precision switches"),
    "list_output.py": ("correctness", "shape_mismatch", "got a list of 1, expected tensor[5, 123, 77]"),
    # faults
    "sys_exit.py": ("run", "runtime_error", "SystemExit(3)"),
    "os_exit.py": ("compile", "crash", "exited with status 0"),
    "huge_alloc.py": ("compile", "crash", "memory"),
}


@pytest.fixture(scope="module")
def rejected(pool, relu_task) -> dict[str, EvalResult]:
    out = {}
    for name in REJECTED:
        out[name] = pool.evaluate(relu_task, hostile(name))
    return out


@pytest.mark.parametrize("name", list(REJECTED))
def test_hostile_candidate_is_rejected(rejected, name):
    stage, kind, text = REJECTED[name]
    res = rejected[name]
    assert not res.correct
    assert res.error_kind == kind, res.error
    assert res.stage == stage, (res.stage, res.error)
    assert text in (res.error or ""), res.error


def test_honest_candidates_keep_their_verdicts_after_the_hostile_ones(
    pool, relu_task, rejected, restarts_at_start
):
    # The patches, threads and corrupted state of every candidate above died with its process.
    assert_honest_still_judged(pool, relu_task)
    assert pool.restarts == restarts_at_start  # no hostile candidate took its judge down


def test_a_number_made_a_tensor_in_forward_is_a_constant(pool, relu_task):
    res = pool.evaluate(relu_task, hostile("honest_python_scalar.py"))
    assert res.correct, res.error


@pytest.mark.parametrize("precision, expected", [("strict", (False, "highest")), ("tf32", (True, "high"))])
def test_candidate_runs_at_the_precision_the_reference_ran(pool, relu_task, precision, expected):
    # torch's default lets cuDNN convolutions use TF32: a strict candidate that kept F.conv2d was judged
    # against a float64 reference while its convolution ran in TF32 (level2/21 on an H200, 13% mismatched)
    res = pool.evaluate(
        relu_task, hostile("precision_reader.py", EXPECTED=repr(expected)), EvalConfig(precision=precision)
    )
    assert res.correct, res.error


def test_sys_exit_names_its_line(rejected):
    assert "candidate.py, line" in rejected["sys_exit.py"].error


def test_candidate_sees_no_verdict_channel(pool, relu_task):
    res = pool.evaluate(relu_task, hostile("argv_and_env.py"))
    assert res.error_kind == "runtime_error", res.error
    assert "argv=['candidate']" in res.error  # no descriptor, pid or job id to forge a verdict with
    fds = ast.literal_eval(re.search(r"fds=(\[.*?\])", res.error).group(1))
    # stdin, the log as stdout and stderr, its own channel, and the memfds of this call's inputs
    assert fds[:3] == ["null", "output.log", "output.log"], fds
    assert fds.count("socket") == 1 and set(fds[3:]) <= {"socket", "memfd"}, fds


def test_secrets_stay_out_and_nothing_gets_out(pool, relu_task, tmp_path, confinement, judge_secret):
    needs(confinement, "filesystem")
    needs(confinement, "network")
    target = tmp_path / "stolen.txt"
    received: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    judged = threading.Event()

    def accept() -> None:
        # Listens until the verdict is in: a loop that outlived the socket's close() spun on its EBADF for the
        # rest of 30 s, a core's worth of this test process taken from the tests after it.
        end = time.monotonic() + 30
        while time.monotonic() < end and not received and not judged.is_set():
            try:
                conn, _ = server.accept()
                received.append(conn.recv(100))
                conn.close()
            except OSError:
                pass

    listener = threading.Thread(target=accept, daemon=True)
    listener.start()
    res = pool.evaluate(
        relu_task,
        hostile(
            "exfiltrate.py", TARGET_FILE_PATH=target, **{"PORT = 0": f"PORT = {server.getsockname()[1]}"}
        ),
    )
    judged.set()
    listener.join()  # its last accept() returns within 0.2 s, with any connection the candidate made
    server.close()
    seen = report(res)
    name, secret = judge_secret
    assert os.environ.get(name) == secret  # the judge was started with the secret at hand
    assert secret not in (res.error or "")
    assert "keys=[]" in seen, seen
    assert "file=ok" not in seen and not target.exists(), seen
    assert "net=ok" not in seen and not received, seen
    assert "proc=ok" not in seen, seen  # no process environment with the secret is readable


def test_signals_do_not_leave_the_sandbox(pool, relu_task, confinement, restarts_at_start):
    needs(confinement, "signals")
    got: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
    try:
        before = judge_pid(pool)
        res = pool.evaluate(
            relu_task,
            hostile(
                "signal_outside.py",
                **{"RUNNER_PID = 0": f"RUNNER_PID = {os.getpid()}", "JUDGE_PID = 0": f"JUDGE_PID = {before}"},
            ),
        )
        seen = report(res)
        time.sleep(0.2)
        assert not got, "the candidate signalled the test runner"
        assert "runner=sent" not in seen and "judge=sent" not in seen, seen
        assert judge_pid(pool) == before and pool.restarts == restarts_at_start
        assert_honest_still_judged(pool, relu_task)
    finally:
        signal.signal(signal.SIGUSR1, previous)


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(pid))
    return found


def test_escaped_child_dies_with_the_candidate(pool, relu_task):
    marker = f"kw-hostile-marker-{os.getpid()}"
    res = pool.evaluate(relu_task, hostile("escape_child.py", **{"kw-hostile-marker-0": marker}))
    assert res.correct, res.error  # the answer is right; what it left behind is killed
    deadline = time.monotonic() + 5
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes_with(marker)


def test_run_directories_cannot_be_written(pool, relu_task, tmp_path, confinement):
    needs(confinement, "filesystem")
    log = tmp_path / "evaluations.jsonl"
    log.write_text('{"correct": false}\n')
    res = pool.evaluate(relu_task, hostile("write_run_dir.py", EVAL_LOG_PATH=log))
    assert "log=written" not in report(res)
    assert log.read_text() == '{"correct": false}\n'


def test_ctypes_reached_through_torch_is_contained(pool, relu_task, tmp_path, confinement):
    needs(confinement, "filesystem")
    target = tmp_path / "libc.txt"
    res = pool.evaluate(relu_task, hostile("ctypes_through_torch.py", TARGET_FILE_PATH=target))
    assert report(res) == "open=-1", res.error
    assert not target.exists()


def test_layer_norm_that_ignores_its_parameters_fails(pool):
    res = pool.evaluate(load_task(HOSTILE / "task_layernorm.py"), hostile("ignores_affine.py"))
    assert (res.correct, res.error_kind) == (False, "mismatch"), res.error


def test_judge_and_candidates_die_with_their_parent(tmp_path, relu_task):
    """A pool whose process dies mid-evaluation (a candidate spinning) leaves no process behind."""
    import subprocess
    import sys

    script = tmp_path / "parent.py"
    marker = f"kw-orphan-marker-{os.getpid()}"
    # the candidate says it is spinning with a file in its folder (under the judge's), where the parent
    # waits for it instead of sleeping a fixed while
    spin = hostile("honest.py").replace(
        "return relu(x)",
        f"import time\n        open('spinning', 'w').close()\n        while True: time.sleep(0.01)  # {marker}",
    )
    script.write_text(
        "import glob, os, sys, threading, time\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from kernelwright.hardware import WorkerPool\n"
        "from kernelwright.tasks import Task\n"
        # the task as loaded here: loading it there would start a loader process too (~2 s of CPU)
        f"task = Task.model_validate_json({relu_task.model_dump_json()!r})\n"
        "pool = WorkerPool(device='cpu', workers=1)\n"
        f"threading.Thread(target=pool.evaluate, args=(task, {spin!r}), daemon=True).start()\n"
        "deadline = time.monotonic() + 120\n"
        "while not (found := glob.glob(os.path.join(pool._workers[0].tmpdir, 'cand-*', 'spinning'))):\n"
        "    assert time.monotonic() < deadline, 'the candidate never started spinning'\n"
        "    time.sleep(0.05)\n"
        "spinning = []\n"  # the candidate processes in that folder, seen from here
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        if os.readlink(f'/proc/{pid}/cwd') == os.path.dirname(found[0]): spinning.append(pid)\n"
        "    except OSError: pass\n"
        "print(pool._workers[0].proc.pid, *spinning, flush=True)\n"
        "os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    judge, *spinning = (int(pid) for pid in out.stdout.split())
    assert spinning, out.stdout  # the spinning candidate was seen from outside

    def left() -> list[int]:
        alive = [judge] if Path(f"/proc/{judge}").exists() and not _zombie(judge) else []
        for p in _processes_with("kernelwright.hardware.isolation.forkserver"):
            args = _cmdline(p)
            if args and args[-1] == str(judge) and not _zombie(p):
                alive.append(p)
        alive += [p for p in spinning if Path(f"/proc/{p}").exists() and not _zombie(p)]
        return alive + [p for p in _processes_with(marker) if not _zombie(p)]

    deadline = time.monotonic() + 15
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left(), "the judge, its fork server or the spinning candidate outlived the pool's process"


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_confinement_is_reported(pool, relu_task):
    res = pool.evaluate(relu_task, hostile("honest.py"))
    c = res.extra["confinement"]
    assert c["environment"] == "minimal"
    if landlock_abi() or os.geteuid() == 0:
        assert c["filesystem"] != "not confined" and c["network"] != "not confined", c


def test_timing_timeout_is_a_failure():
    """A candidate that cannot be timed is not a result: a timeout in the timing stage fails it."""
    from kernelwright.hardware.judge.pool import WorkerPool as Pool

    pool = Pool.__new__(Pool)
    pool.device = "cpu"
    pool._workers = []

    class FakeJudge:
        info: dict = {}

        def log_tail(self) -> str:
            return ""

        def restart(self) -> None:
            pass

    verified = EvalResult(correct=True, stage="timing")
    res = pool._on_timeout(FakeJudge(), EvalConfig(), "timing", 10.0, verified)  # type: ignore[arg-type]
    assert (res.correct, res.error_kind, res.stage) == (False, "timeout", "timing")


@pytest.mark.parametrize("level", [pytest.param("no-namespaces", marks=pytest.mark.slow), "none"])
def test_confinement_can_be_lowered_and_says_so(relu_task, monkeypatch, level):
    """Hosts where namespaces (or Landlock) get in the way: the harness still judges, and every result
    says what was not confined."""
    monkeypatch.setenv("KERNELWRIGHT_CONFINE", level)
    with WorkerPool(device="cpu", workers=1) as p:
        res = p.evaluate(relu_task, hostile("honest.py"))
        wrong = p.evaluate(relu_task, hostile("honest_wrong.py"))
    assert res.correct and not wrong.correct, (res.error, wrong.error)
    c = res.extra["confinement"]
    assert c["namespaces"] == [] and c["environment"] == "minimal"
    if level == "none":
        assert c["filesystem"] == "not confined" and c["landlock_abi"] == 0


def test_unknown_confinement_level_is_one_line(monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CONFINE", "loose")
    with pytest.raises(ValueError, match="KERNELWRIGHT_CONFINE must be one of full, no-namespaces, none"):
        WorkerPool(device="cpu", workers=1)


@pytest.mark.slow
def test_unbounded_recursion_is_contained_by_the_memory_limit(pool, relu_task, restarts_at_start):
    """The recursion grows the candidate process to its address-space limit (~25 s on 2 cores)."""
    res = pool.evaluate(relu_task, hostile("deep_recursion.py"))
    assert (res.correct, res.error_kind, res.stage) == (False, "crash", "compile"), res.error
    assert pool.restarts == restarts_at_start


def test_inputs_come_from_fresh_seeds_listed_after_the_verdict(pool, relu_task):
    """Every job draws its own input seeds from the OS, whatever the configured seed; the result lists them."""
    a = pool.evaluate(relu_task, hostile("honest.py"), EvalConfig(seed=0))
    b = pool.evaluate(relu_task, hostile("honest.py"), EvalConfig(seed=0))
    assert a.correct and b.correct, (a.error, b.error)
    seeds_a, seeds_b = a.extra["input_seeds"], b.extra["input_seeds"]
    assert set(seeds_a) == set(seeds_b) == {"small", "sliced", "recheck", "parameters"}, seeds_a
    every = [s for v in seeds_a.values() for s in v]
    assert len(set(every)) == len(every) and not set(every) & {s for v in seeds_b.values() for s in v}
    assert len(next(iter(seeds_a.values()))) == 3  # one per trial of the first shape


def test_answers_precomputed_for_guessable_seeds_pass_only_on_those_seeds(pool, relu_task, rejected):
    """The attack works where the seeds are known (replayed here as the judge once drew them: 0, 1, 2 and a
    fixed offset): it is the judge's fresh seeds that fail it (REJECTED above), not its kernel."""
    guessed = {"small": [0, 1, 2], "sliced": [0], "recheck": [7919]}
    res = pool.evaluate(relu_task, hostile("precomputed_seed_inputs.py"), EvalConfig(input_seeds=guessed))
    assert res.correct, res.error
    assert {k: v for k, v in res.extra["input_seeds"].items() if k in guessed} == guessed


def test_parameters_derived_in_init_pass_only_with_the_perturbation_they_guessed(pool):
    """Likewise for the perturbation of the parameters: fresh per job, it fails a candidate that worked out
    the perturbed values in __init__ (and ignores the loaded ones); replayed as it once was, it passes."""
    task = load_task(HOSTILE / "task_layernorm.py")
    fresh = pool.evaluate(task, hostile("derives_perturbed_parameters.py"))
    assert (fresh.correct, fresh.error_kind) == (False, "mismatch"), fresh.error
    guessed = pool.evaluate(
        task, hostile("derives_perturbed_parameters.py"), EvalConfig(input_seeds={"parameters": [0]})
    )
    assert guessed.correct, guessed.error


def test_listed_seeds_reproduce_a_failure(pool, relu_task):
    first = pool.evaluate(relu_task, hostile("honest_wrong.py"))
    again = pool.evaluate(
        relu_task, hostile("honest_wrong.py"), EvalConfig(input_seeds=first.extra["input_seeds"])
    )
    assert (first.error_kind, again.error_kind) == ("mismatch", "mismatch"), (first.error, again.error)
    assert again.extra["input_seeds"] == first.extra["input_seeds"]
    assert again.max_abs_error == first.max_abs_error and again.error == first.error


def _peak_rss_since_reset(pid: int, job) -> int | None:
    """Bytes the process's resident set grew to above where it stood, while `job` ran (None: cannot tell)."""

    def status(field: str) -> int:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise KeyError(field)

    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak resident set starts again from here
    except OSError:
        return None
    base = status("VmRSS")
    job()
    return status("VmHWM") - base


@pytest.mark.parametrize(
    "name, kind, text",
    [
        ("forged_huge_reply.py", "forbidden", "a forged reply from candidate code"),  # 1 GiB declared in it
        ("huge_output.py", "shape_mismatch", "shape [33554432], expected [5, 123, 77]"),  # 128 MiB answered
    ],
)
def test_an_oversized_answer_costs_the_judge_nothing(pool, relu_task, name, kind, text):
    """Nothing a reply declares is mapped before it is known to be the runner's own and to fit the reference's
    output: a forged 1 GiB answer once took the judge's peak memory from 363 MB to 3.3 GB."""
    got: list[EvalResult] = []
    grew = _peak_rss_since_reset(judge_pid(pool), lambda: got.append(pool.evaluate(relu_task, hostile(name))))
    res = got[0]
    assert (res.correct, res.error_kind) == (False, kind), res.error
    assert text in (res.error or ""), res.error
    if grew is None:
        pytest.skip("this host does not let the judge's peak memory be reset (/proc/PID/clear_refs)")
    assert grew < 96 << 20, f"the judge's resident set grew by {grew >> 20} MiB"
