"""Python processes for tests, forked from a warm parent that has imported torch and Triton (interpreted) once.

A test that runs a program under Triton's interpreter in a process of its own (tests.fakes.writer's
run_interpreted and run_beside_model) spent 1.5-2.5 s of CPU importing torch and Triton before the program
did anything: more than many of the programs themselves, a dozen times in the default suite. The parent
here (one per test process, started on first use) imports them with TRITON_INTERPRET=1 and nothing else
(no kernelwright module, no program), then forks a child per run, as hardware.compile.server does for
compile feedback: the child is a new process with the run's working directory, environment, argv,
sys.path[0], stdin (/dev/null), stdout and stderr (files read back here), and it runs the program as
`__main__`, as `python -c PROGRAM` or `python SCRIPT ARGS` would; nothing it imports or patches reaches
the test process or the next run.

Where a run's environment differs from the parent's in what torch or Triton read when imported (TRITON_*,
TORCH_*, OMP_*, ...), or the parent cannot start, the run is a cold `python` process, as before.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

# What torch and Triton read as they are imported: a run that sets any of these differently from the warm
# parent gets a cold process.
_IMPORT_ENV = ("TRITON", "TORCH", "PYTORCH", "OMP_", "MKL", "KMP_", "CUDA", "LD_", "PYTHON", "NUMPY")

_SERVER = r"""
import json, os, sys, traceback, types
import torch, triton, triton.language as tl

def child(req):
    os.setsid()  # its own process group: the caller kills it and whatever it started at a timeout
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(req["stdout"], os.O_WRONLY | os.O_TRUNC)
    err = os.open(req["stderr"], os.O_WRONLY | os.O_TRUNC)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.argv = list(req["argv"])
    sys.path[0] = req["path0"]
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    if req["script"] is not None:
        main.__file__ = req["script"]
    sys.modules["__main__"] = main
    code = 0
    try:
        source = req["code"] if req["script"] is None else open(req["script"]).read()
        program = compile(source, req["script"] or "<string>", "exec")
    except SyntaxError:
        traceback.print_exception(*sys.exc_info()[:2], None)
        os._exit(1)
    try:
        exec(program, main.__dict__)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException as exc:
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)  # from the program's frame on
        code = 1
    try:  # as the interpreter ends: its threads joined, its exit functions run, its streams flushed
        import atexit, threading
        threading._shutdown()
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
        code = code or 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 120
    os._exit(code)

reply = sys.stdout
print(json.dumps({"ready": True}), file=reply, flush=True)
for line in sys.stdin:
    req = json.loads(line)
    reply.flush()
    pid = os.fork()
    if pid == 0:
        child(req)
    print(json.dumps({"pid": pid}), file=reply, flush=True)
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    print(json.dumps({"status": code}), file=reply, flush=True)
"""


class _Parent:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            bufsize=1,
        )
        self.owner = os.getpid()
        self.ready = False

    def read(self, timeout: float | None) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


_parent: _Parent | None = None
_broken = False
_lock = threading.Lock()  # one run at a time through the parent


def _close() -> None:
    if _parent is not None and _parent.owner == os.getpid():
        _parent.close()


atexit.register(_close)


def _warm_parent(env: dict[str, str]) -> _Parent | None:
    """The warm parent for a run in `env`, or None where the run must be a cold process."""
    global _parent, _broken
    if _broken:
        return None
    if _parent is None or _parent.owner != os.getpid() or _parent.proc.poll() is not None:
        _parent = _Parent(dict(os.environ, TRITON_INTERPRET="1"))
    if any(k.startswith(_IMPORT_ENV) and env.get(k) != _parent.env.get(k) for k in {*env, *_parent.env}):
        return None
    if not _parent.ready:
        msg = _parent.read(120)
        if not msg or not msg.get("ready"):
            _parent.close()
            _broken = True
            return None
        _parent.ready = True
    return _parent


def run_python(
    argv: list[str], env: dict[str, str], timeout: float, cwd: Path | str | None = None
) -> subprocess.CompletedProcess[str]:
    """`python ARGV` (ARGV: `-c PROGRAM ...` or `SCRIPT ...`) in `cwd` with `env`, as subprocess.run with
    capture_output=True and text=True runs it: in a fork of the warm parent where it can, else cold. Raises
    subprocess.TimeoutExpired after `timeout` seconds (the run's process group killed)."""
    cwd = str(cwd if cwd is not None else os.getcwd())
    with _lock:
        parent = _warm_parent(env)
        if parent is not None:
            return _run_warm(parent, argv, env, timeout, cwd)
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def _run_warm(
    parent: _Parent, argv: list[str], env: dict[str, str], timeout: float, cwd: str
) -> subprocess.CompletedProcess[str]:
    if argv[0] == "-c":
        script, code, run_argv, path0 = None, argv[1], ["-c", *argv[2:]], ""
    else:
        script, code, run_argv = os.path.abspath(os.path.join(cwd, argv[0])), None, argv
        path0 = os.path.dirname(os.path.realpath(script))
    with tempfile.TemporaryDirectory(prefix="kw-warm-") as tmp:
        paths = {name: os.path.join(tmp, name) for name in ("stdout", "stderr")}
        for path in paths.values():
            Path(path).touch()
        request = {"cwd": cwd, "env": env, "argv": run_argv, "path0": path0, "script": script, "code": code,
                   **paths}  # fmt: skip
        assert parent.proc.stdin is not None
        parent.proc.stdin.write(json.dumps(request) + "\n")
        parent.proc.stdin.flush()
        started = parent.read(60)
        assert started and "pid" in started, f"the warm Python parent did not start the run: {started}"
        done = parent.read(timeout)
        if done is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(started["pid"], signal.SIGKILL)
            parent.read(30)
            raise subprocess.TimeoutExpired([sys.executable, *argv], timeout)
        assert "status" in done, done
        out, err = (Path(paths[name]).read_text() for name in ("stdout", "stderr"))
    return subprocess.CompletedProcess([sys.executable, *argv], done["status"], out, err)
