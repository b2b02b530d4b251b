"""The judge's side of candidate processes: its fork server and one confined candidate process.

`ForkServer` starts and talks to hardware.isolation.forkserver, which forks confined candidate processes ahead of
need; `CandidateProcess` is one of them seen from the judge: requests sent over its channel, one answer
read per request (anything else waiting is a forged reply), and the process killed with everything it
started when the job is done. Nothing here imports or runs candidate code.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from typing import Any

from kernelwright import IMPORT_ROOT
from kernelwright.hardware.isolation import memory_cap
from kernelwright.hardware.isolation.channel import (
    Channel,
    ChannelClosed,
    ProtocolError,
    SharedTensor,
    close_fds,
)
from kernelwright.hardware.isolation.confine import confine_level
from kernelwright.hardware.isolation.env import minimal_env
from kernelwright.hardware.isolation.forkserver_launch import LOG_NAME, launch_fork_server

STANDBY_GPU = 2
"""Candidate processes kept forked ahead of need on a GPU."""

STANDBY_CPU = 1
"""On CPU one is forked ahead too: its ~70 ms of confinement and start-up overlap the previous candidate."""


class CandidateGone(Exception):
    """The candidate process died, hung past its limit or broke the protocol."""

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(text)
        self.kind, self.text = kind, text


class ForkServer:
    """The judge's handle on its hardware.isolation.forkserver process (started lazily, restarted if it dies)."""

    def __init__(
        self,
        device: str,
        gpu: str | None,
        tmpdir: str,
        launched: tuple[subprocess.Popen[bytes], socket.socket] | None = None,
    ) -> None:
        """`launched`: a fork server already started for this process (hardware.isolation.forkserver_launch),
        used by the first start instead of a new one."""
        self.device, self.gpu, self.tmpdir = device, gpu, tmpdir
        self.launched = launched
        # On a GPU a candidate process spends ~4 s starting CUDA, Triton and the profiler: keep two
        # forked ahead; on CPU one (it starts in tens of milliseconds).
        self.standby = STANDBY_GPU if device == "cuda" else STANDBY_CPU
        self.proc: subprocess.Popen[bytes] | None = None
        self.chan: Channel | None = None
        self.cgroup: str | None = None
        """The cgroup its candidates' memory cgroups are made under (hardware.isolation.memory_cap), if any."""
        self.lock = threading.Lock()

    def start(self) -> Channel:
        launched, self.launched = self.launched, None
        self.proc, sock = launched or launch_fork_server(self.device, self.gpu, self.tmpdir)
        chan = Channel(sock)
        got = chan.recv(timeout=120.0)
        if got is None or got[0].get("op") != "ready":
            raise RuntimeError(f"the fork server did not start: {self._log_tail()}")
        level = confine_level()
        if self.device == "cuda":  # the GPU's nodes (nvidia-uvm's are made on first use) exist before the
            try:  # candidates' own /dev is made from the host's
                import torch

                torch.cuda.init()
            except Exception as exc:
                print(f"CUDA did not start in the judge: {exc}", file=sys.stderr)
        chan.send({"op": "configure", "root": self.tmpdir, "standby": self.standby,
                   "env": minimal_env(self.device, home=self.tmpdir, gpu=self.gpu),
                   "namespaces": level == "full", "landlock": level != "none"})  # fmt: skip
        got = chan.recv(timeout=30.0)
        if got is None or got[0].get("op") != "configured":
            raise RuntimeError(f"the fork server could not be configured: {self._log_tail()}")
        self.cgroup = got[0].get("cgroup")
        self.chan = chan
        return chan

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self.tmpdir, LOG_NAME), "rb") as f:
                return f.read()[-1500:].decode(errors="replace")
        except OSError:
            return ""

    def _request(self, msg: dict[str, Any], timeout: float = 30.0) -> tuple[dict[str, Any], list[int]]:
        with self.lock:
            if self.chan is None or self.proc is None or self.proc.poll() is not None:
                self.start()
            assert self.chan is not None
            self.chan.send(msg)
            got = self.chan.recv(timeout=timeout)
            if got is None:
                raise RuntimeError(f"the fork server did not answer {msg.get('op')!r}")
            return got

    def spawn(self) -> tuple[Channel, int, str]:
        """A candidate process: (the judge's channel to it, its keeper's pid, its private directory)."""
        reply, fds = self._request({"op": "spawn"})
        if reply.get("op") != "spawned" or len(fds) != 1:
            close_fds(fds)
            raise RuntimeError(f"the fork server could not start a candidate process: {reply}")
        return Channel(socket.socket(fileno=fds[0])), int(reply["pid"]), str(reply["private_dir"])

    def kill(self, pid: int) -> int | None:
        reply, _ = self._request({"op": "kill", "pid": pid})
        return reply.get("status")

    def wait(self, pid: int, timeout: float) -> tuple[int | None, bool]:
        """(the keeper's exit status or None while it runs, whether its memory cgroup's cap killed it)."""
        reply, _ = self._request({"op": "wait", "pid": pid, "timeout": timeout}, timeout=timeout + 10)
        if reply.get("op") != "exited":
            return None, False
        return reply.get("status"), bool(reply.get("memory_cap_hit"))

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        if self.chan is not None:
            self.chan.close()
        if self.cgroup:  # its candidates' cgroups, once they are gone (they die with the server)
            memory_cap.remove_tree(self.cgroup)
        self.proc, self.chan, self.cgroup = None, None, None


def _read_tail(folder: str, name: str, size: int) -> str:
    """At most the last `size` bytes of `folder`/`name`, opened without following a link at either step
    (O_NOFOLLOW, relative to the folder's own descriptor), and only when it is a plain file with one
    name (a hard link made by the candidate would lend it someone else's file); "" otherwise."""
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dfd
        )
    except OSError:
        return ""
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return ""
        os.lseek(fd, max(0, st.st_size - size), os.SEEK_SET)
        return os.read(fd, size).decode(errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _died(code: int | None) -> str:
    if code is None:
        return "the candidate process closed its end of the channel and had not exited 5 s later"
    if code > 128:
        try:
            return f"the candidate process died from {signal.Signals(code - 128).name}"
        except ValueError:
            return f"the candidate process died from signal {code - 128}"
    return f"the candidate process exited with status {code}"


def output_tail(text: str, private_dir: str, limit: int = 1500) -> str:
    """What of a candidate's output a verdict quotes: at most `limit` characters, the candidate's file named
    `candidate.py` and this package's files by their path in it. Where the process crashed, the crash's
    stack is quoted from its start (the failing frame first, as faulthandler prints it), so the frame in
    the candidate's code is never the part cut off, however long the callers' paths are."""
    kept = [line for line in text.splitlines() if not line.startswith("Extension modules:")]
    text = "\n".join(kept).replace(os.path.join(private_dir, "candidate.py"), "candidate.py")
    text = text.replace(IMPORT_ROOT + os.sep, "").strip()
    crash = text.rfind("Fatal Python error")
    if crash != -1 and len(text) - crash > limit:
        return text[crash : crash + limit].rstrip()
    return text[-limit:]


class CandidateProcess:
    """One confined candidate process, seen from the judge."""

    def __init__(self, server: ForkServer) -> None:
        self.server = server
        t0 = time.perf_counter()
        self.chan, self.pid, self.private_dir = server.spawn()
        self.spent: dict[str, float] = {"spawn": time.perf_counter() - t0}
        self.peaks: dict[str, int] = {}
        """Per request kind: the candidate process's peak allocated device memory, as it reports it."""
        self.info: dict[str, Any] = {}
        self.alive = True
        self.limit_s: float | None = None
        """The current stage's limit, for messages."""
        """`spent`: seconds spent waiting on each kind of request (where an evaluation's time goes)."""
        self.attached: set[str] = set()
        """Shapes whose device buffers this process has opened (CUDA IPC)."""

    def log_tail(self, limit: int = 1500) -> str:
        """The end of the candidate's output.log, read as the candidate left it but never through a link:
        a link (symbolic or hard) or anything but a plain file there reads as no output."""
        return output_tail(_read_tail(self.private_dir, "output.log", 4 * limit), self.private_dir, limit)

    def _gone(self, stage: str, op: str | None = None) -> CandidateGone:
        """The candidate process ended (or closed its channel) before answering `op`, the request it was
        serving; the exit status, the request and the end of its output say what happened."""
        status, memory_cap_hit = self.server.wait(self.pid, 5.0)
        self.alive = False
        log = self.log_tail()
        why = " (killed by its memory cgroup: it took more memory than its cap)" if memory_cap_hit else ""
        doing = f" before it answered the judge's {op!r} request" if op else ""
        if status == 0:  # not a crash of the interpreter: something chose to end the process
            why += (" (an exit with status 0 without an answer: candidate code called sys.exit/os._exit, or the "
                    "candidate-side runner rejected the request; its output below may say which)")  # fmt: skip
        return CandidateGone(
            "crash",
            f"{_died(status)} during the {stage} stage{doing}{why}" + (f"\noutput:\n{log}" if log else ""),
        )

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        t0 = time.perf_counter()
        got = self.receive(timeout, "compile")
        self.spent["ready"] = time.perf_counter() - t0
        msg, fds = got
        close_fds(fds)
        if msg.get("op") != "ready":
            raise CandidateGone(
                "forbidden", "the candidate process broke the judge's protocol before it started"
            )
        self.info = msg
        return msg

    def receive(self, timeout: float, stage: str, op: str | None = None) -> tuple[dict[str, Any], list[int]]:
        try:
            got = self.chan.recv(timeout=max(timeout, 0.0))
        except ChannelClosed:
            raise self._gone(stage, op) from None
        except ProtocolError as exc:
            raise CandidateGone(
                "forbidden", f"the candidate process broke the judge's protocol: {exc}"
            ) from None
        if got is None:
            limit = f" {self.limit_s:g} s" if self.limit_s else ""
            raise CandidateGone("timeout", f"the {stage} stage ran past its{limit} limit; the candidate process "
                                 "was killed")  # fmt: skip
        return got

    def request(self, msg: dict[str, Any], shared: list[SharedTensor], timeout: float, stage: str,
                fds: list[int] | None = None) -> tuple[dict[str, Any], list[int]]:  # fmt: skip
        """Send one request and read its one answer. Anything already waiting on the channel is an answer
        nobody asked for: a frame written by candidate code (the runner answers each request once)."""
        if self.chan.poll(0):
            raise CandidateGone("forbidden", "the candidate process sent an answer no request asked for (a "
                                 "forged reply from candidate code?)")  # fmt: skip
        if shared:
            msg = {**msg, "tensors": [s.description() for s in shared]}
        t0 = time.perf_counter()
        op = str(msg.get("op"))
        try:
            self.chan.send(msg, [s.fd for s in shared] + list(fds or []))
        except ChannelClosed:
            raise self._gone(stage, op) from None
        except (ProtocolError, OSError) as exc:  # the judge's own side failed: not the candidate's fault
            raise CandidateGone("harness_error", f"the judge could not send its {op!r} request to the candidate "
                                f"process: {exc}") from None  # fmt: skip
        reply: dict[str, Any] = {}
        try:
            reply, fds_in = self.receive(timeout, stage, op)
            return reply, fds_in
        finally:
            self.spent[op] = self.spent.get(op, 0.0) + time.perf_counter() - t0
            peak = reply.get("device_peak_bytes")
            if isinstance(peak, int):  # as the candidate process says: for the memory report only
                key = f"{op} {msg.get('stage', '')}{' evidence' if msg.get('evidence') else ''}".strip()
                self.peaks[key] = max(self.peaks.get(key, 0), peak)

    def in_step(self, timeout: float) -> None:
        """A last request: the runner must answer it, and nothing else may be waiting. A forged reply sent
        by candidate code shifts every later answer by one, which this exposes."""
        reply, fds = self.request({"op": "ping"}, [], timeout, "correctness")
        close_fds(fds)
        if reply.get("op") != "pong" or self.chan.poll(0.05):
            raise CandidateGone(
                "forbidden",
                "the candidate process's answers are out of step with the judge's "
                f"requests (got {reply.get('op')!r} for a ping): a forged reply from candidate code?",
            )

    def close(self) -> None:
        if self.alive:
            try:
                self.chan.send({"op": "exit"})
            except (ChannelClosed, OSError, ProtocolError):
                pass
        try:
            self.server.kill(self.pid)
        except Exception as exc:  # the fork server itself is gone; it is restarted on next use
            print(f"killing candidate process {self.pid} failed: {exc}", file=sys.stderr)
            self.server.stop()
        self.chan.close()
        self.alive = False
        shutil.rmtree(self.private_dir, ignore_errors=True)
