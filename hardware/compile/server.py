"""A warm parent for offline compile feedback's phases: torch and Triton imported once, a fresh fork per phase.

compile_for_target runs two phases per candidate (capture under the interpreter, then the compile for
the target), each in a process of its own so that candidate code never runs in the caller and a crash or
a hang costs only that process. Started cold, each phase spends ~1.8 s of CPU importing torch and Triton
before it does anything. This server imports them (and compile_child) once, never runs candidate code
itself, and forks one child per phase: the child is as fresh as a cold process as far as any candidate is
concerned (no earlier candidate ran in its parent), starts in milliseconds, and is killed the same way
(its own session, so the caller kills its process group, ptxas included, at the deadline). The child
imports no candidate code itself: compile_child runs the phase in a confined candidate process
(hardware.isolation.contain.run_contained), with the candidate's minimal environment (compile_feedback.phase_env),
which is also the only environment this server gets.

Protocol (JSON lines; the server reads its stdin and writes its stdout):
- after its imports: {"ready": true}
- request {"phase", "job", "env", "log"} -> {"pid": PID} at once, then {"pid": PID, "status": CODE} when
  the child has exited (CODE: its exit code, or -SIGNAL).
The server exits when its stdin closes (its caller is gone). Each server runs one phase at a time; the
caller keeps a few of each kind and takes an idle one per phase (`run_phase`). A capture server imports
Triton with TRITON_INTERPRET=1 and a compile server without it: Triton decorates its own library functions
(tl.max, tl.softmax, ...) when it is imported, as interpreted or as compiled functions, so one import
cannot serve both phases.

Used by hardware.compile.feedback unless KERNELWRIGHT_COMPILE_SERVER=0, or a different Python is asked
for; if a server cannot start or stops answering, that phase runs as a cold subprocess instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import IO, Any

ENV_SWITCH = "KERNELWRIGHT_COMPILE_SERVER"
_START_TIMEOUT_S = 60.0
_REAP_TIMEOUT_S = 10.0
_MAX_IDLE = 4


# ----------------------------------------------------------------------------------------------------
# server side


def _child(phase: str, job: str, env: dict[str, str], log: str) -> None:
    """In the forked child: become a fresh phase process, run the phase, exit with its code."""
    code = 1
    try:
        os.setsid()  # its own process group: the caller kills it, and whatever it started, at the deadline
        from kernelwright.hardware.isolation.confine import die_with_parent

        die_with_parent()
        os.environ.clear()
        os.environ.update(env)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the process ends below
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        os.chdir(job)
        from kernelwright.hardware.compile.child import child_main

        code = child_main([phase, job])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(inp: IO[str], out: IO[str]) -> None:
    import torch  # noqa: F401 - imported once here, inherited by every phase
    import triton  # noqa: F401

    import kernelwright.hardware.compile.child  # noqa: F401

    def send(**msg: Any) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    send(ready=True)
    for line in inp:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(req["phase"], req["job"], req["env"], req["log"])
        send(pid=pid)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        send(pid=pid, status=code)


def main() -> None:
    serve(sys.stdin, sys.stdout)


# ----------------------------------------------------------------------------------------------------
# caller side


class _Server:
    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelwright.hardware.compile.server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            bufsize=1,
        )
        self.ready = False
        self.owner = os.getpid()  # a forked copy of the caller must not talk to its parent's servers

    def read(self, timeout: float) -> dict[str, Any] | None:
        """The next message, or None when none came within `timeout` (or the server is gone)."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, timeout))
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.kill()
            self.proc.wait(timeout=5)


_idle: dict[bool, list[_Server]] = {True: [], False: []}  # by interpret (capture) or not (compile)
_lock = threading.Lock()
_broken = False


def enabled(python: str) -> bool:
    return not _broken and python == sys.executable and os.environ.get(ENV_SWITCH, "1") != "0"


def _take(interpret: bool) -> _Server:
    with _lock:
        idle = _idle[interpret]
        if any(s.owner != os.getpid() for s in idle):
            idle.clear()  # inherited through a fork: the parent's servers, not ours to use or close
        while idle:
            server = idle.pop()
            if server.alive():
                return server
            server.close()
    from kernelwright.hardware.compile.feedback import phase_env  # (it imports this module)

    return _Server(phase_env(interpret))


def _give_back(server: _Server, interpret: bool) -> None:
    with _lock:
        if server.alive() and len(_idle[interpret]) < _MAX_IDLE:
            _idle[interpret].append(server)
            return
    server.close()


def run_phase(phase: str, job: Path, env: dict[str, str], log: Path, deadline: float) -> int | None | str:
    """Run one phase in a fork of a warm server: its exit code, None at the deadline (its process group
    killed), or "unavailable" when no server could run it (the caller then runs it cold)."""
    global _broken
    interpret = phase == "capture"
    try:
        server = _take(interpret)
    except OSError:
        _broken = True
        return "unavailable"
    if not server.ready:
        msg = server.read(min(_START_TIMEOUT_S, max(0.0, deadline - time.monotonic())))
        if not msg or not msg.get("ready"):
            server.close()
            if msg is None and time.monotonic() >= deadline:
                return None
            _broken = True  # it could not even import: cold processes from now on
            return "unavailable"
        server.ready = True
    try:
        assert server.proc.stdin is not None
        server.proc.stdin.write(
            json.dumps({"phase": phase, "job": str(job), "env": env, "log": str(log)}) + "\n"
        )
        server.proc.stdin.flush()
        started = server.read(_REAP_TIMEOUT_S)
    except (OSError, ValueError):
        started = None
    if not started or "pid" not in started:
        server.close()
        return "unavailable"
    pid = int(started["pid"])
    done = server.read(deadline - time.monotonic())
    if done is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        done = server.read(_REAP_TIMEOUT_S)
        if done is None:
            server.close()
        else:
            _give_back(server, interpret)
        return None
    _give_back(server, interpret)
    return int(done["status"])


if __name__ == "__main__":
    main()
