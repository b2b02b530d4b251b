"""Starts one fresh, confined process per candidate, forked from a process that has imported torch.

Started by the judge (hardware.judge.server) as `python -m kernelwright.hardware.isolation.forkserver FD DEVICE PARENT_PID` with the
candidates' minimal environment; it imports torch, triton and the candidate-side harness once, never
initialises CUDA, and then forks on request, so a candidate process starts in milliseconds with no
state of any earlier candidate (a fork of a process that never ran one).

Per candidate, three processes (hardware.isolation.contain's chain, which the compile feedback's phases
are started through too):
- a keeper, forked from this server: it makes itself a subreaper, joins its memory cgroup, enters new
  PID, network and mount namespaces where the OS allows (hardware.isolation.confine.enter_namespaces),
  forks the init (contain.fork_init), answers the candidate's one request for its memory cap and waits
  for the init (contain.wait_init); then it kills whatever was left behind and exits with the
  candidate's status (128 + signal when a signal ended it);
- an init: the first process of the new PID namespace (when there is one; every process in it dies
  with it), which mounts the namespace's own /proc and /dev, forks the candidate process and reaps orphans;
- the candidate process: confined (hardware.isolation.confine.confine_candidate), then serving the judge on its
  own socket (hardware.candidate.runner).

Every process here dies with its parent (PR_SET_PDEATHSIG): the judge, this server, the keeper, the
candidate. The server is a subreaper too, so a process that escapes a keeper's tree ends up here and
is killed with the next `kill`.

Candidate processes are forked ahead of need (`standby` of them, on a GPU): each confines itself and
initialises CUDA, Triton's driver and the profiler while the judge is busy with the previous candidate,
then waits, holding nothing, until it is handed over.

Requests from the judge (JSON on the control channel):
- configure {env, root, standby, namespaces, landlock} -> configured {cgroup}: the candidates' environment,
  where their private directories go, how many to keep forked ahead, which confinement steps to take; the
  answer names the cgroup their memory cgroups go under (hardware.isolation.memory_cap), for the judge to remove;
- spawn -> spawned {pid, private_dir} with the judge's end of the candidate's socket beside it; `pid`
  is the keeper's;
- kill {pid} -> killed {status}: SIGKILL the keeper (and so the candidate's namespace), then every other
  descendant of this server;
- wait {pid, timeout} -> exited {status} | running: the keeper's exit status, once the candidate died.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import socket
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass

from kernelwright.hardware.isolation import memory_cap
from kernelwright.hardware.isolation.channel import Channel, ChannelClosed, ProtocolError, close_fds
from kernelwright.hardware.isolation.confine import (
    CANDIDATE_UID_BASE,
    Confinement,
    become_subreaper,
    candidate_paths,
    confine_candidate,
    die_with_parent,
    enter_namespaces,
    uid_probe,
)
from kernelwright.hardware.isolation.contain import fork_init, wait_init
from kernelwright.hardware.isolation.processes import kill_descendants


def _keeper(msg: dict, sock_fd: int, device: str) -> None:
    """The keeper's life (see the module docstring); never returns."""
    code = 70
    try:
        maxfd = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        os.closerange(3, sock_fd)  # the control channel and anything else the server holds
        os.closerange(sock_fd + 1, max(sock_fd + 2, min(maxfd, 1 << 20)))
        die_with_parent()
        become_subreaper()
        # Its memory cgroup first, while it is still in the server's namespaces: everything it forks is in it.
        cgroup, memory = None, str(msg.get("memory") or "address space (RLIMIT_AS) only")
        if msg.get("cgroup"):
            cgroup, memory = memory_cap.join(msg["cgroup"], _cgroup_name(os.getpid()))
        namespaces, problem = enter_namespaces() if msg.get("namespaces", True) else ([], "switched off")
        private_dir = str(msg["private_dir"])
        msg = {**msg, "keeper": os.getpid()}
        keeper_end, candidate_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cap_fd = candidate_end.fileno() if cgroup else -1

        def candidate(problem: str | None) -> int:
            _candidate(msg, sock_fd, device, private_dir, namespaces, problem, cap_fd, memory)
            return 71  # (it never returns)

        child = fork_init(namespaces, problem, candidate, close_in_init=[sock_fd] + ([cap_fd] if cgroup else []),
                          in_init=keeper_end.close)  # fmt: skip
        candidate_end.close()
        os.close(sock_fd)
        if cgroup is not None:  # the candidate's one request for its cap, or its end
            pidfd = os.pidfd_open(child)
            ready, _, _ = select.select([pidfd, keeper_end.fileno()], [], [])
            if keeper_end.fileno() in ready:
                memory_cap.serve_request(keeper_end, cgroup, msg["cgroup"]["version"])
            os.close(pidfd)
        keeper_end.close()
        code = wait_init(child, namespaces)  # the init's exit code carries the candidate's status
    except BaseException:  # noqa: B036 - the keeper must exit, whatever happened
        traceback.print_exc()
    os._exit(code)


def _cgroup_name(keeper: int) -> str:
    return f"keeper-{keeper}"


def _candidate(msg: dict, sock_fd: int, device: str, private_dir: str, namespaces: list[str],
               problem: str | None, cap_fd: int, memory: str) -> None:  # fmt: skip
    """The candidate process's start: confinement, then the runner; never returns."""
    try:
        die_with_parent()
        os.chdir(private_dir)
        sys.argv = ["candidate"]  # the fork server's arguments name the judge; the candidate needs none
        env = msg.get("env") or {}
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in env.items()})
        os.environ.update(HOME=private_dir, TMPDIR=private_dir,
                          TRITON_CACHE_DIR=os.path.join(private_dir, "triton-cache"))  # fmt: skip
        tempfile.tempdir = (
            private_dir  # the fork server's choice is cached in the module; this one is its own
        )
        _point_triton_at(private_dir)
        confinement = Confinement(memory=memory, notes=[problem] if problem else [])
        uid = msg.get("uid")
        if uid is not None:  # a uid of its own: BASE + 1 + its keeper's pid (as the server sees it)
            uid = CANDIDATE_UID_BASE + 1 + int(msg["keeper"])
        elif msg.get("uid_problem"):
            confinement.notes.append(str(msg["uid_problem"]))
        if cap_fd >= 0 and device == "cpu":  # the cap is lowered at load on CPU only (runner.load)
            memory_cap.attach(cap_fd)
        elif cap_fd >= 0:
            os.close(cap_fd)
        confine_candidate(confinement, private_dir=private_dir, namespaces=namespaces,
                          use_landlock=msg.get("landlock", True), uid=uid)  # fmt: skip
        from kernelwright.hardware.candidate.runner import serve_candidate

        serve_candidate(sock_fd, device, private_dir, confinement)
    except BaseException:  # noqa: B036
        traceback.print_exc()
    os._exit(71)


def _point_triton_at(private_dir: str) -> None:
    """Triton reads its cache directory from the environment, but may have cached the value."""
    try:
        import triton

        knobs = getattr(triton, "knobs", None)
        if knobs is not None and hasattr(knobs, "cache"):
            knobs.cache.dir = os.path.join(private_dir, "triton-cache")
    except Exception:  # an older triton: the environment variable is enough
        pass


def _wait(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if got == pid:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.005)


@dataclass
class _Standby:
    """A candidate process forked ahead of need, warming up (CUDA, Triton, the profiler) until asked for."""

    pid: int
    """The keeper's pid."""
    sock: socket.socket
    """The judge's end of the candidate's channel."""
    private_dir: str


def _fork_candidate(device: str, settings: dict) -> _Standby:
    private_dir = tempfile.mkdtemp(prefix="cand-", dir=settings["root"])
    judge_end, candidate_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        judge_end.close()
        _keeper({"private_dir": private_dir, "env": settings["env"], "namespaces": settings.get("namespaces", True),
                 "landlock": settings.get("landlock", True), "uid": settings.get("uid"),
                 "uid_problem": settings.get("uid_problem"), "cgroup": settings.get("cgroup"),
                 "memory": settings.get("memory")}, candidate_end.fileno(), device)  # fmt: skip
    candidate_end.close()
    return _Standby(pid, judge_end, private_dir)


def _settle(settings: dict) -> None:
    """What the host allows, found once per configuration: a uid of the candidates' own (where it can
    read what they need) and a parent for their memory cgroups."""
    if settings.get("landlock", True):  # "none" keeps root: it is for debugging the harness only
        root = str(settings["root"])
        mode = os.stat(root).st_mode & 0o777
        os.chmod(root, mode | 0o111)  # the way to each candidate's own directory (0700, its uid's) is open
        problem = uid_probe(candidate_paths(os.path.join(root, "cand-probe")))
        if problem is None:  # the judge's logs beside them stay the judge's
            for entry in os.scandir(root):
                if entry.is_file(follow_symlinks=False):
                    os.chmod(entry.path, 0o600)
        else:
            os.chmod(root, mode)
        settings["uid"], settings["uid_problem"] = (None, problem) if problem else (CANDIDATE_UID_BASE, None)
    parent, memory = memory_cap.find_parent()
    settings["cgroup"] = parent
    settings["memory"] = (
        f"address space (RLIMIT_AS) and every file's size (RLIMIT_FSIZE: memfds, /dev/shm) only: {memory}"
        if parent is None
        else None
    )


def _reaped(settings: dict, pid: int, status: int | None) -> dict:
    """After a keeper is gone: its cgroup's verdict (whether the memory cap killed the candidate), then
    the cgroup removed."""
    parent = settings.get("cgroup")
    if not parent or status is None:
        return {}
    path = os.path.join(parent["path"], _cgroup_name(pid))
    if not os.path.isdir(path):
        return {}
    hit = memory_cap.oom_kills(path, parent["version"]) > 0
    memory_cap.remove_tree(path)
    return {"memory_cap_hit": hit}


def serve(chan: Channel, device: str) -> None:
    chan.send({"op": "ready", "pid": os.getpid()})
    keepers: set[int] = set()
    standby: list[_Standby] = []
    settings: dict = {}

    def top_up() -> None:
        while settings and len(standby) < int(settings.get("standby", 0)):
            s = _fork_candidate(device, settings)
            keepers.add(s.pid)
            standby.append(s)

    while True:
        try:
            got = chan.recv()
        except (ChannelClosed, ProtocolError):
            break
        if got is None:
            continue
        msg, fds = got
        close_fds(fds)
        op = msg.get("op")
        if op == "configure":  # {env, root, standby, namespaces, landlock}: what every candidate process gets
            settings = dict(msg)
            _settle(settings)
            top_up()
            chan.send({"op": "configured", "cgroup": (settings.get("cgroup") or {}).get("path")})
        elif op == "spawn":
            if not settings:
                chan.send({"op": "error", "error": "spawn before configure"})
                continue
            s = standby.pop(0) if standby else _fork_candidate(device, settings)
            keepers.add(s.pid)
            chan.send({"op": "spawned", "pid": s.pid, "private_dir": s.private_dir}, [s.sock.fileno()])
            s.sock.close()
            top_up()
        elif op == "kill":
            pid = int(msg["pid"])
            status = None
            if pid in keepers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                status = _wait(pid, 10.0)
                keepers.discard(pid)
            kill_descendants(spare={s.pid for s in standby})
            chan.send({"op": "killed", "status": status, **_reaped(settings, pid, status)})
        elif op == "wait":
            pid = int(msg["pid"])
            status = _wait(pid, float(msg.get("timeout", 5.0))) if pid in keepers else None
            if status is not None:
                keepers.discard(pid)
                chan.send({"op": "exited", "status": status, **_reaped(settings, pid, status)})
            else:
                chan.send({"op": "running"})
        else:
            chan.send({"op": "error", "error": f"unknown request {op!r}"})
    kill_descendants()
    if settings.get("cgroup"):
        memory_cap.remove_tree(settings["cgroup"]["path"])


def main(argv: list[str]) -> None:
    fd, device, parent_pid = int(argv[0]), argv[1], int(argv[2])
    die_with_parent()
    if os.getppid() != parent_pid:  # the judge died before the line above took effect
        os._exit(3)
    become_subreaper()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    # Everything a candidate process needs, imported once; CUDA is initialised only after the fork.
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    import kernelwright.hardware.candidate.runner  # noqa: F401
    from kernelwright.hardware.candidate import interpreter_fixes
    from kernelwright.hardware.isolation.warmup import warm_up

    interpreter_fixes.apply()  # under TRITON_INTERPRET=1: bf16 dots computed as a GPU computes them

    warm_up(device)
    serve(Channel(socket.socket(fileno=fd)), device)


if __name__ == "__main__":
    main(sys.argv[1:])
