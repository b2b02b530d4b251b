"""What confines a candidate process, tested from outside it: /dev, privileges, memory, the judge's reading
of its folder, the GPU-target compile step, and a bad KERNELWRIGHT_CONFINE.

Each hostile candidate (tests/kernels/hostile/) goes for one class of hole and reports what it managed in
its error message; every test also looks from outside (files on the host, a loopback listener, the
verdict) so that a candidate lying about its success changes nothing. Where this host cannot provide a
mechanism (no mount namespace, no memory cgroup) the test says so and skips: the result's confinement
record says the same to a user. The candidates are judged by the session's shared pool
(tests/kernels/conftest.py): each runs in a process of its own, so none depends on a new judge.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from kernelwright import IMPORT_ROOT
from kernelwright.hardware.compile.feedback import compile_for_target
from kernelwright.hardware.isolation import memory_cap
from kernelwright.hardware.isolation.confine import CANDIDATE_UID_BASE, Confinement, drop_privileges
from kernelwright.hardware.isolation.memory_cap import cap_memory
from kernelwright.tasks import load_task

HOSTILE = Path(__file__).parent / "hostile"
CANDIDATES = Path(__file__).parent / "candidates"
ROOT = Path(__file__).resolve().parents[2]


def hostile(name: str, **replace: object) -> str:
    body = (HOSTILE / name).read_text()
    for key, value in replace.items():
        body = body.replace(key, str(value))
    return (HOSTILE / "_kernel.txt").read_text() + "\n\n" + body


def report(text: str | None) -> str:
    found = re.search(r"REPORT (.*?) END", text or "", re.S)
    assert found, text
    return found.group(1)


@pytest.fixture(scope="module")
def relu_task():
    return load_task(CANDIDATES / "task_relu.py")


@pytest.fixture(scope="module")
def confinement(pool, relu_task) -> dict:
    res = pool.evaluate(relu_task, hostile("honest.py"))
    assert res.correct, res.error
    return res.extra["confinement"]


def test_dev_holds_only_what_a_candidate_needs(pool, relu_task, confinement):
    if not confinement["devices"].startswith("own /dev"):
        pytest.skip(f"no mount namespace here: {confinement['devices']}")
    mark = uuid.uuid4().hex[:10]
    victim = Path(f"/dev/kw-victim-{mark}")  # a file of the host's /dev the candidate tries to delete
    victim.write_text("keep")
    try:
        res = pool.evaluate(relu_task, hostile("dev_tamper.py", MARK_TOKEN=mark, VICTIM_PATH=victim))
        seen = report(res.error)
        assert victim.exists(), seen
    finally:
        victim.unlink(missing_ok=True)
    assert not res.correct
    for what in ("kmsg", "fifo", "chardev", "delete"):
        assert f"{what}=ok" not in seen, seen
    assert "null=ok" in seen, seen  # what it needs still works
    dev = set(re.search(r"dev=(\[.*?\])", seen).group(1).strip("[]").replace("'", "").split(", "))
    assert {"null", "zero", "urandom", "shm"} <= dev and "kmsg" not in dev and "vda" not in dev, dev
    assert not [p for p in os.listdir("/dev") if mark in p]  # nothing made in the host's /dev
    # its /dev/shm was its own: the store is gone with it, and the next candidate starts without it
    assert not [p for p in os.listdir("/dev/shm") if mark in p]
    again = pool.evaluate(
        relu_task, hostile("dev_tamper.py", MARK_TOKEN=mark + "b", VICTIM_PATH="/nonexistent")
    )
    assert f"kw-store-{mark}'" not in report(again.error)
    ok = pool.evaluate(relu_task, hostile("honest.py"))
    assert ok.correct, ok.error


def test_no_capabilities_and_no_new_privileges(pool, relu_task, confinement):
    res = pool.evaluate(relu_task, hostile("privileges.py"))
    seen = report(res.error)
    zero = "0000000000000000"
    assert f"eff={zero}" in seen and f"prm={zero}" in seen and f"bnd={zero}" in seen, seen
    assert f"amb={zero}" in seen and "nnp=1" in seen, seen
    assert "rlimit=ok" not in seen and "setuid=ok" not in seen and "chown=ok" not in seen, seen
    assert confinement["privileges"].startswith("no capabilities"), confinement
    if confinement["privileges"].endswith("(root)"):  # kept root (without capabilities): the record says why
        assert any(n.startswith("uid ") and "cannot use" in n for n in confinement["notes"]), confinement
    else:
        assert f"uid={os.getuid()}" not in seen, seen


def test_candidate_processes_seen_from_outside(pool, relu_task, confinement):
    """The pool keeps a candidate process forked ahead, confined and waiting: read from the host's /proc,
    it has no capability, no new privileges, its own /dev (where it has a mount namespace) and its own
    memory cgroup (where the record says one holds)."""
    assert pool.evaluate(relu_task, hostile("honest.py")).correct
    tmpdir = pool._workers[0].tmpdir
    found = {}
    for _ in range(100):  # the next one is forked while the last result comes back
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{pid}/cwd").startswith(os.path.join(tmpdir, "cand-")):
                    found[pid] = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                pass
        if found:
            break
        time.sleep(0.1)
    assert found, "no candidate process waiting"
    for pid, status in found.items():
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        for cap in ("CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd"):
            assert int(fields[cap], 16) == 0, (cap, fields[cap])
        assert fields["NoNewPrivs"].strip() == "1"
        if confinement["devices"].startswith("own /dev"):
            mounts = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
            dev = [m.split() for m in mounts if m.split()[4] == "/dev"]
            assert dev and dev[-1][dev[-1].index("-") + 1] == "tmpfs" and "ro" in dev[-1][5].split(","), dev
        if confinement["memory"].startswith("cgroup"):
            cgroups = Path(f"/proc/{pid}/cgroup").read_text()
            assert re.search(r"/kernelwright-\d+/keeper-\d+$", cgroups, re.M), cgroups


def test_dropping_to_a_uid_of_its_own_keeps_what_a_candidate_needs():
    """The uid step itself, in a fork (this host's Python may not be readable by another uid, so the
    judge may keep root there): no capabilities, the uid asked for, its own directory still writable,
    its /proc entries still its own (CUDA names its threads there), the death signal still set."""
    if os.geteuid() != 0:
        pytest.skip("only root can change uid")
    folder = Path(tempfile.mkdtemp(prefix="kw-uid-"))  # where another uid can reach it, as the judge's are
    try:
        _drop_in_a_fork(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _drop_in_a_fork(folder: Path) -> None:
    uid = CANDIDATE_UID_BASE + 7
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        out = "failed"
        try:
            os.chown(folder, uid, uid)
            state, problems = drop_privileges(uid)
            (folder / "x").write_text("mine")
            with open(f"/proc/self/task/{os.getpid()}/comm", "w") as f:
                f.write("renamed")
            import ctypes

            sig = ctypes.c_int()
            ctypes.CDLL(None).prctl(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG
            try:
                os.setuid(0)
                back = "ok"
            except OSError:
                back = "refused"
            out = f"{state}|{problems}|{os.getuid()}|{sig.value}|{back}"
        except BaseException as exc:  # noqa: B036
            out = f"failed: {exc!r}"
        os.write(wfd, out.encode())
        os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd) as f:
        got = f.read()
    os.waitpid(pid, 0)
    state, problems, got_uid, sig, back = got.split("|")
    assert state == f"no capabilities, uid {uid}" and problems == "[]", got
    assert int(got_uid) == uid and int(sig) == 9 and back == "refused", got
    assert (folder / "x").read_text() == "mine"


def test_memory_in_memfds_counts_against_the_cap(pool, relu_task, confinement):
    if not confinement["memory"].startswith("cgroup"):
        pytest.skip(f"no memory cgroup here: {confinement['memory']}")
    t0 = time.monotonic()
    res = pool.evaluate(relu_task, hostile("memfd_hog.py"))
    assert (res.correct, res.error_kind) == (False, "crash"), res.error
    assert "memory cgroup" in res.error and "REPORT" not in res.error, res.error
    assert time.monotonic() - t0 < 60
    ok = pool.evaluate(relu_task, hostile("honest.py"))
    assert ok.correct and ok.extra["confinement"]["memory_limit_bytes"] < 4 << 30, ok.extra["confinement"]


def test_without_a_cgroup_every_memfd_is_capped_at_the_budget():
    """Where no memory cgroup can be made, the cap at load still bounds each file the candidate writes,
    memfds included (RLIMIT_FSIZE), as well as its address space: in a fork, as a candidate process would."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        out = "failed"
        try:
            c = Confinement()
            limit = cap_memory(c, 64 << 20)  # no keeper channel here: no cgroup
            fd = os.memfd_create("hog")
            block = b"\1" * (1 << 20)
            written = 0
            try:
                while written < 200 << 20:
                    written += os.write(fd, block)
                grew = "ok"
            except OSError as exc:
                grew = errno.errorcode[exc.errno]
            try:
                os.ftruncate(os.memfd_create("sparse"), 1 << 30)
                sparse = "ok"
            except OSError as exc:
                sparse = errno.errorcode[exc.errno]
            out = f"{written >> 20}|{grew}|{sparse}|{limit > 0}"
        except BaseException as exc:  # noqa: B036
            out = f"failed: {exc!r}"
        os.write(wfd, out.encode())
        os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd) as f:
        got = f.read()
    os.waitpid(pid, 0)
    assert got == "64|EFBIG|EFBIG|True", got


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_the_judge_reads_no_file_through_a_link_the_candidate_made(pool, relu_task, tmp_path, kind):
    secret = tmp_path / "secret.txt"
    secret.write_text("kw-private-words\n")
    res = pool.evaluate(relu_task, hostile("log_link.py", SECRET_PATH=secret, LINK_KIND=kind))
    assert (res.correct, res.error_kind) == (False, "crash"), res.error
    assert "kw-private-words" not in (res.error or "") and "kw-private-words" not in str(res.extra)
    assert secret.read_text() == "kw-private-words\n"


def test_the_gpu_target_compile_step_is_a_candidate_process(tmp_path, monkeypatch):
    """compile_for_target imports the candidate (capture and compile): it gets no keys, no network, no
    write outside its job, no capabilities, and its own PID namespace and /dev where the host allows."""
    site = tmp_path / "site"
    site.mkdir()
    plant = tmp_path / "planted.txt"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-kw-fake-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-kw-fake-anthropic")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    received: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                received.append(conn.recv(1000))
                conn.close()
            except OSError:
                pass

    listener = threading.Thread(target=accept, daemon=True)
    listener.start()
    source = hostile("compile_step_escape.py", PLANT_PATH=plant, SITE_DIR_PATH=site,
                     **{"PORT = 0": f"PORT = {server.getsockname()[1]}"})  # fmt: skip
    relu = load_task(CANDIDATES / "task_relu.py")
    try:
        r = compile_for_target(source, relu, "h200", shapes="small")
    finally:
        stop.set()
        listener.join()
        server.close()
    seen = report(r.run_error)
    assert "keys=[]" in seen and "net=ok" not in seen and not received, (seen, received)
    assert "plant=ok" not in seen and not plant.exists(), seen
    assert "site=ok" not in seen and not (site / "sitecustomize.py").exists(), seen
    assert "caps=0000000000000000" in seen, seen
    parent, _ = memory_cap.find_parent()
    if parent is not None:  # a memory cgroup can be made here: the phase ran in one of its own
        memory_cap.remove_tree(parent["path"])
        assert re.search(r"/kernelwright-\d+/phase\b", seen), seen
    # the kernels it launched before it reported still compiled for the target
    assert r.kernels and all(k.compiled for k in r.kernels), r.summary()
    if "kmsg" in os.listdir("/dev"):
        dev = re.search(r"dev=(\[.*?\])", seen).group(1)
        pids = int(re.search(r"pids=(\d+)", seen).group(1))
        if "'kmsg'" not in dev:  # a private /dev: then it had a PID namespace too
            assert pids <= 3, seen
    # a later Python started with that PYTHONPATH runs nothing the candidate left
    out = subprocess.run([sys.executable, "-c", "import builtins; print(hasattr(builtins, 'KW_PLANTED'))"],
                         env={**os.environ}, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.stdout.strip() == "False", out


def test_an_honest_candidate_compiles_for_the_target_under_confinement():
    relu = load_task(CANDIDATES / "task_relu.py")
    r = compile_for_target(hostile("honest.py"), relu, "h200", shapes="small")
    assert r.ok and r.kernels and all(k.compiled and k.registers for k in r.kernels), r.summary()


def test_a_bad_confinement_level_is_one_line_before_anything_runs(monkeypatch):
    env = {**os.environ, "KERNELWRIGHT_CONFINE": "bogus"}
    proc = subprocess.run(
        [sys.executable, "-m", "kernelwright.cli.main", "eval", str(CANDIDATES / "task_relu.py"),
         str(HOSTILE / "honest.py")],
        env=env, capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2, proc
    assert proc.stderr.strip().splitlines() == [
        "kernelwright: KERNELWRIGHT_CONFINE must be one of full, no-namespaces, none, not 'bogus'"
    ], proc.stderr
    assert proc.stdout == ""
    monkeypatch.setenv("KERNELWRIGHT_CONFINE", "bogus")
    with pytest.raises(ValueError, match="KERNELWRIGHT_CONFINE must be one of"):
        compile_for_target(hostile("honest.py"), load_task(CANDIDATES / "task_relu.py"), "h200")


def test_a_proc_that_cannot_be_mounted_still_leaves_the_candidate_its_own_dev():
    """private_mounts: a failed /proc mount (a masked /proc) must not skip the private /dev."""
    script = textwrap.dedent(
        """
        import os, sys
        from kernelwright.hardware.isolation import confine
        namespaces, problem = confine.enter_namespaces()
        if "mount" not in namespaces:
            print("SKIP", problem); sys.exit(0)
        pid = os.fork()
        if pid == 0:
            real = confine._mount
            def failing(source, target, fstype, flags, data=None):
                if fstype == "proc":
                    return 1  # EPERM, as a masked /proc answers
                return real(source, target, fstype, flags, data)
            confine._mount = failing
            problem = confine.private_mounts()
            print("PROBLEM", problem)
            print("PRIVATE_DEV", confine.dev_is_private(), os.path.exists("/dev/kmsg"))
            os._exit(0)
        os.waitpid(pid, 0)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": IMPORT_ROOT}).stdout  # fmt: skip
    if out.startswith("SKIP"):
        pytest.skip(f"no mount namespace here: {out}")
    assert "could not mount /proc" in out, out
    assert "PRIVATE_DEV True False" in out, out
