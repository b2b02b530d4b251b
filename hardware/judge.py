"""The judge: the process that owns the references and issues every verdict, and never imports a candidate.

Started by `hardware.sandbox.WorkerPool` as `python -m kernelwright.hardware.judge FD DEVICE TMPDIR PARENT_PID`, one
per GPU (N on CPU), and kept for many jobs so references stay warm. For each job it starts a fresh
candidate process through its fork server (hardware.forkserver), confined, and drives it over a JSON
channel (hardware.channel, hardware.runner): the candidate process gets the source, constructor
arguments, the reference's perturbed parameters and each trial's inputs; the judge keeps the pristine
inputs, the expected outputs, the tolerances and the timing checks, and reads back only sealed
shared-memory tensors and JSON. A candidate process that dies, hangs, breaks the protocol or is done
is killed with every process it started; the judge carries on with the next job.

Protocol with the pool (multiprocessing.connection over a socketpair; both sides are trusted code):
- judge -> pool: ("ready", info) once; per job ("stage", job_id, stage) at every stage change
  (reference, compile, correctness, timing, baseline: see hardware.config.WorkerStage),
  ("partial", job_id, result) once the candidate is verified and timed (so a slow torch.compile
  baseline keeps the verdict), and ("result", job_id, result, restart) at the end; `restart` asks the
  pool to replace the judge (a CUDA error or out-of-memory in the judge's own work).
- pool -> judge: ("eval", job) or ("stop",).
The judge enforces the candidate stages' time limits itself (it kills the candidate process); the pool
keeps an outer limit for the judge's own work (the reference, the baseline) and as a safety net.

Verification (hardware.verify has the tolerance table):
- the reference `Model` is built from the task's init inputs with torch seeded, then its floating
  parameters and buffers are perturbed (seeded), so a kernel that ignores a parameter whose default
  value is neutral (a LayerNorm's weight and bias) fails; ModelNew is built with the same seed and
  the reference's perturbed state_dict is loaded into it (it must hold every reference key, same
  shapes);
- shapes: the task's full inputs and its small ones on a GPU, the small ones on CPU, and always a
  second shape: `get_small_inputs()` where defined, else the task at other sizes found by changing its
  module-level size constants (tasks.resize); a task too large for the CPU interpreter is verified
  there at such a size;
- every trial uses fresh inputs from seed + trial; the model instance is kept across trials, so a
  result cached from an earlier call fails a later one; inputs must be unchanged after forward (or
  changed exactly as the reference changes them);
- the output's structure must match the reference's exactly (a tensor is not a one-element list),
  every tensor a plain torch.Tensor, same shape, dtype and device, then values within tolerance, NaN
  and inf included; memory forward allocates reads as NaN unless written (the candidate side poisons
  it and fails a candidate that switches the poisoning off);
- runtime evidence (hardware.evidence) from one recorded forward: the output must come from Triton
  kernels' writes, not from torch ops with kernels beside them, and nothing may run out of sight;
- in strict precision, float32 outputs are also compared against a float64 run of the reference with
  an allowance for the reference's own rounding error (hardware.verify).

Timing (GPU): the candidate process times its calls with CUDA events (L2 flushed before each), the
judge times the eager reference the same way, in alternating rounds; the judge then times a
synchronised loop of candidate calls with its own wall clock and fails a candidate whose reported
times are far below it; last, the timed inputs get new contents (a seed no trial used) and the
answer must follow. The torch.compile'd reference is timed once per task in the judge, cached on disk.
"""

from __future__ import annotations

import copy
import faulthandler
import hashlib
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, NoReturn, get_args

from kernelwright import IMPORT_ROOT
from kernelwright.hardware.channel import (
    Channel,
    ChannelClosed,
    ProtocolError,
    SharedTensor,
    channel_pair,
    check_sealed,
    close_fds,
    decode_value,
    encode_value,
    parse_description,
    tensor_nbytes,
)
from kernelwright.hardware.config import EvalConfig
from kernelwright.hardware.confine import confine_level, die_with_parent, minimal_env
from kernelwright.hardware.evidence import fingerprint
from kernelwright.hardware.failures import classify_exception, tail
from kernelwright.hardware.result import ErrorKind, EvalResult, Versions

_REPO_ROOT = IMPORT_ROOT  # on the fork server's PYTHONPATH: `import kernelwright` works there
# The float64 reference runs within this share of the reference stage's time limit (all its runs in one
# job together). Before the first run its cost is estimated as the float32 run's time times
# _FP64_COST_FACTOR (pessimistic: cuDNN float64 convolutions and CPU kernels are several times slower);
# later runs use the measured time.
_FP64_BUDGET_SHARE = 0.25
_FP64_COST_FACTOR = 32.0
_TASK_CACHE_SIZE = 3
_RECHECK_SEED_OFFSET = 7919
"""The post-timing re-check draws inputs from seed + this: a seed no verification trial uses."""
_PERTURB_SEED_OFFSET = 104729
CPU_PRIMARY_ELEMENTS = 250_000
"""On CPU, a task without small inputs is verified at a size whose inputs hold at most this many elements."""
CPU_SECOND_ELEMENTS = 40_000
"""On CPU, the second (derived) shape's inputs hold at most this many elements."""
_CANDIDATE_START_S = 60.0
STANDBY_GPU = 2
"""Candidate processes kept forked ahead of need on a GPU."""
STANDBY_CPU = 1
"""On CPU one is forked ahead too: its ~70 ms of confinement and start-up overlap the previous candidate."""
_CPU_MEMORY_BASE = 1 << 30
LEAN_BYTES = 1 << 30
"""Tasks whose own tensors take more than this are judged lean (see Judge._fits)."""
_CPU_MEMORY_FACTOR = 8
_ROUNDS = 10
_WALL_SLACK_MS = 0.05
_ERROR_KINDS = set(get_args(ErrorKind))
PARAMETERS_NOTE = "parameters and buffers perturbed (seeded) and loaded into ModelNew"
"""The note every result carries: the reference's state was perturbed and handed to the candidate."""


class _Stop(Exception):
    """Ends a job early; the result it carries is already filled in."""


class _Unverifiable(Exception):
    """The task itself cannot be verified (its reference is random): no candidate's fault."""


class _CandidateGone(Exception):
    """The candidate process died, hung past its limit or broke the protocol."""

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(text)
        self.kind, self.text = kind, text


# ------------------------------------------------------------------------------------------ processes
class ForkServer:
    """The judge's handle on its hardware.forkserver process (started lazily, restarted if it dies)."""

    def __init__(self, device: str, gpu: str | None, tmpdir: str) -> None:
        self.device, self.gpu, self.tmpdir = device, gpu, tmpdir
        # On a GPU a candidate process spends ~4 s starting CUDA, Triton and the profiler: keep two
        # forked ahead; on CPU one (it starts in tens of milliseconds).
        self.standby = STANDBY_GPU if device == "cuda" else STANDBY_CPU
        self.proc: subprocess.Popen[bytes] | None = None
        self.chan: Channel | None = None
        self.lock = threading.Lock()

    def _start(self) -> Channel:
        chan, child = channel_pair()
        env = minimal_env(self.device, home=self.tmpdir, gpu=self.gpu)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_REPO_ROOT, os.environ.get("PYTHONPATH", "")) if p)
        log = open(os.path.join(self.tmpdir, "forkserver.log"), "ab")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kernelwright.hardware.forkserver", str(child.fileno()), self.device, str(os.getpid())],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(child.fileno(),), cwd=self.tmpdir,
            )  # fmt: skip
        finally:
            child.close()
            log.close()
        got = chan.recv(timeout=120.0)
        if got is None or got[0].get("op") != "ready":
            raise RuntimeError(f"the fork server did not start: {self._log_tail()}")
        level = confine_level()
        chan.send({"op": "configure", "root": self.tmpdir, "standby": self.standby,
                   "env": minimal_env(self.device, home=self.tmpdir, gpu=self.gpu),
                   "namespaces": level == "full", "landlock": level != "none"})  # fmt: skip
        got = chan.recv(timeout=30.0)
        if got is None or got[0].get("op") != "configured":
            raise RuntimeError(f"the fork server could not be configured: {self._log_tail()}")
        self.chan = chan
        return chan

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self.tmpdir, "forkserver.log"), "rb") as f:
                return f.read()[-1500:].decode(errors="replace")
        except OSError:
            return ""

    def _request(self, msg: dict[str, Any], timeout: float = 30.0) -> tuple[dict[str, Any], list[int]]:
        with self.lock:
            if self.chan is None or self.proc is None or self.proc.poll() is not None:
                self._start()
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

    def wait(self, pid: int, timeout: float) -> int | None:
        reply, _ = self._request({"op": "wait", "pid": pid, "timeout": timeout}, timeout=timeout + 10)
        return reply.get("status") if reply.get("op") == "exited" else None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        if self.chan is not None:
            self.chan.close()
        self.proc, self.chan = None, None


def _died(code: int | None) -> str:
    if code is None:
        return "the candidate process died"
    if code > 128:
        try:
            return f"the candidate process died from {signal.Signals(code - 128).name}"
        except ValueError:
            return f"the candidate process died from signal {code - 128}"
    return f"the candidate process exited with status {code}"


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
        try:
            with open(os.path.join(self.private_dir, "output.log"), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 4 * limit))
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        kept = [line for line in text.splitlines() if not line.startswith("Extension modules:")]
        text = "\n".join(kept).replace(os.path.join(self.private_dir, "candidate.py"), "candidate.py")
        return text.strip()[-limit:]

    def _gone(self, stage: str) -> _CandidateGone:
        status = self.server.wait(self.pid, 5.0)
        self.alive = False
        log = self.log_tail()
        return _CandidateGone(
            "crash", f"{_died(status)} during the {stage} stage" + (f"\noutput:\n{log}" if log else "")
        )

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        t0 = time.perf_counter()
        got = self.receive(timeout, "compile")
        self.spent["ready"] = time.perf_counter() - t0
        msg, fds = got
        close_fds(fds)
        if msg.get("op") != "ready":
            raise _CandidateGone(
                "forbidden", "the candidate process broke the judge's protocol before it started"
            )
        self.info = msg
        return msg

    def receive(self, timeout: float, stage: str) -> tuple[dict[str, Any], list[int]]:
        try:
            got = self.chan.recv(timeout=max(timeout, 0.0))
        except ChannelClosed:
            raise self._gone(stage) from None
        except ProtocolError as exc:
            raise _CandidateGone(
                "forbidden", f"the candidate process broke the judge's protocol: {exc}"
            ) from None
        if got is None:
            limit = f" {self.limit_s:g} s" if self.limit_s else ""
            raise _CandidateGone("timeout", f"the {stage} stage ran past its{limit} limit; the candidate process "
                                 "was killed")  # fmt: skip
        return got

    def request(self, msg: dict[str, Any], shared: list[SharedTensor], timeout: float, stage: str,
                fds: list[int] | None = None) -> tuple[dict[str, Any], list[int]]:  # fmt: skip
        """Send one request and read its one answer. Anything already waiting on the channel is an answer
        nobody asked for: a frame written by candidate code (the runner answers each request once)."""
        if self.chan.poll(0):
            raise _CandidateGone("forbidden", "the candidate process sent an answer no request asked for (a "
                                 "forged reply from candidate code?)")  # fmt: skip
        if shared:
            msg = {**msg, "tensors": [s.description() for s in shared]}
        t0 = time.perf_counter()
        try:
            self.chan.send(msg, [s.fd for s in shared] + list(fds or []))
        except (ChannelClosed, OSError):
            raise self._gone(stage) from None
        reply: dict[str, Any] = {}
        try:
            reply, fds_in = self.receive(timeout, stage)
            return reply, fds_in
        finally:
            op = str(msg.get("op"))
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
            raise _CandidateGone(
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


# ------------------------------------------------------------------------------------------ references
@dataclass
class _Shape:
    """One input shape a candidate is verified on."""

    label: str
    """"full", "small" or "derived"; the key of the model built for it on both sides."""
    module: Any
    small: bool
    """Use the module's get_small_inputs() / get_small_init_inputs()."""
    note: str = ""
    transform: Any = None
    """Applied to the module's inputs (a sliced shape, for tasks whose sizes are not constants)."""


@dataclass
class _Sample:
    """One trial's pristine inputs and the reference's outputs, float32 and (where used) float64."""

    inputs: list[Any]
    out: Any
    inputs_after: list[Any] | None = None
    """The inputs as the reference left them, when its forward changed them; None when it did not."""
    out64: Any = None
    fp64_status: str | None = None
    """None: not tried; "used"; "not used: ..." (not applicable); "unavailable: ..." (it failed)."""
    buffers: dict[str, Any] = field(default_factory=dict)
    """Every buffer of the reference after this forward (running stats updated in train mode)."""


@dataclass
class _Reference:
    """One shape of one task: the reference model (perturbed) and its cached samples per seed."""

    shape: _Shape
    init_inputs: list[Any]
    model: Any
    samples: dict[tuple[int, str, str], _Sample] = field(default_factory=dict)
    """Per (seed, precision, mode)."""
    fp64_s: float | None = None
    fp64_failure: str | None = None
    exchange: _Exchange | None = None
    """On a GPU with CUDA IPC: the device buffers lent to candidate processes for this shape."""
    state0: dict[str, Any] = field(default_factory=dict)
    """The perturbed state_dict every forward starts from (a train-mode forward updates running stats)."""
    lean: bool = False
    """Hold one sample at a time (the task is large; see _TaskState.lean)."""
    lean_float64: bool = False
    """A lean shape that still gets its float64 reference (see lean_float64_fits)."""
    built_modes: dict[str, bool] = field(default_factory=dict)
    """Each submodule's `training` flag as the task's constructor left it (a task may build a module in
    eval mode on purpose)."""

    def restore(self, mode: str) -> None:
        """Put the model back in its starting state, in `mode`: "train" is the modes the constructor left
        (train, unless the task chose otherwise for a module), "eval" is model.eval()."""
        if self.state0:
            self.model.load_state_dict(self.state0)
        if mode == "eval":
            self.model.eval()
        else:
            for name, module in self.model.named_modules():
                module.training = self.built_modes.get(name, True)


@dataclass
class _Exchange:
    """Device buffers for one shape, exported to candidate processes (hardware.cuda_ipc)."""

    inputs: list[Any]
    outputs: list[Any]

    def descriptions(self) -> dict[str, Any]:
        return {
            "inputs": [b.description() for b in self.inputs],
            "outputs": [b.description() for b in self.outputs],
        }


@dataclass
class _TaskState:
    module: Any
    name: str
    digest: str
    shapes: dict[tuple[bool, bool], list[_Shape]] = field(default_factory=dict)
    """Per (device is CUDA, second shape wanted): the shapes verified, primary first."""
    refs: dict[tuple[str, int], _Reference] = field(default_factory=dict)
    reference_ops: set[str] | None = None
    baseline_ms: dict[str, float | None] = field(default_factory=dict)
    modes: list[str] | None = None
    """The modules' modes a candidate is verified in: ["train"], ["eval"] or ["train", "eval"]."""
    modes_note: str = ""
    stateful: bool = False
    """Forward changes the reference's buffers (running stats): each call starts from the loaded state and
    the candidate's buffers are compared after it."""
    lean: bool = False
    """A large task: one trial's inputs and outputs held at a time (recomputed per candidate), no float64
    reference unless it fits (lean_float64), no copies the judge can do without, other tasks' state dropped
    (see Judge._fits)."""
    lean_float64: bool = False
    """A lean task whose float64 reference fits the memory bound (see lean_float64_fits)."""
    footprint_checked: bool = False
    unfit: str | None = None
    """Why the task does not fit this GPU, once found (every later job is told the same)."""


def lean_float64_fits(fp: Any, free: int) -> bool:
    """Whether a lean task (footprint `fp`, a tasks.resize.Footprint) still gets its float64 reference.

    Long accumulations need it most: a fp32 matmul with K = 524288 (256 x 256 output) differs from the
    fp32 reference by ~0.02, so against that reference alone an honest split-K kernel was rejected. A lean
    task holds about 2x inputs + 3x outputs + 2x parameters while a candidate runs (Judge._fits); the float64
    run needs 3x the footprint at its peak (the fp32 tensors, their float64 copies and the float64 output),
    and its output (2x the outputs) is kept for the comparisons. Both stay within 3x the footprint when the
    outputs are at most half of inputs + parameters: matmuls, reductions, norms' statistics; not elementwise
    ops, whose fp32 reference is accurate anyway. And both must fit the free memory, with 1 GiB to spare.
    """
    held = 2 * fp.inputs + 5 * fp.outputs + 2 * fp.parameters
    peak = max(3 * fp.total, held) + (1 << 30)
    return 2 * fp.outputs <= fp.inputs + fp.parameters and peak <= free


def _slice_inputs(inputs: list[Any], plan: list[list[tuple[int, int]]]) -> list[Any]:
    """Each tensor input i narrowed to its first `size` elements along `dim` for (dim, size) in plan[i]."""
    out = []
    for t, cuts in zip(inputs, plan, strict=True):
        if cuts and hasattr(t, "narrow"):
            for dim, size in cuts:
                t = t.narrow(dim, 0, size)
            t = t.contiguous()
        out.append(t)
    return out


def _sliced(primary: _Shape, device: str) -> _Shape | None:
    """A second shape for a task whose sizes are not module constants: its inputs sliced.

    A dim of the first input is cut to about 2/3 (never below 2: a size-1 dim would broadcast), and so
    is the same dim of every other input of the same rank with the same size there, so sizes that must
    agree still do (a contraction dim, a batch). Tried in turn: every dim, the last, the first; the
    first slicing the reference runs on, with an output of the same rank, is kept.
    """
    import torch

    from kernelwright.tasks import task_inputs, task_model

    try:
        inputs = task_inputs(primary.module, small=primary.small, seed=0, device=device)
        model = task_model(primary.module, small=primary.small, seed=0, device=device)
        with torch.no_grad():
            base = _tensors(model(*_clone(inputs)))
    except Exception:
        return None
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    if not tensors or tensors[0].dim() == 0:
        return None
    lead = list(tensors[0].shape)

    def cut(n: int) -> int:
        return max(2, (2 * n) // 3 - (1 if (2 * n) // 3 % 2 == 0 and n > 3 else 0))

    candidates = [[d for d, n in enumerate(lead) if n >= 3], [len(lead) - 1], [0]]
    for dims in candidates:
        dims = [d for d in dims if lead[d] >= 3]
        if not dims:
            continue
        plan = [
            [(d, cut(lead[d])) for d in dims if t.dim() == len(lead) and t.shape[d] == lead[d]]
            if isinstance(t, torch.Tensor) else []
            for t in inputs
        ]  # fmt: skip
        try:
            with torch.no_grad():
                out = _tensors(model(*_slice_inputs(inputs, plan)))
        except Exception:
            continue
        if [o.dim() for o in out] != [o.dim() for o in base]:
            continue
        first = next(i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor))
        shape_text = "x".join(str(n) for n in _slice_inputs([inputs[first]], [plan[first]])[0].shape)
        return _Shape("sliced", primary.module, primary.small, note=f"{primary.label} inputs sliced to {shape_text}",
                      transform=lambda xs, plan=plan: _slice_inputs(xs, plan))  # fmt: skip
    return None


def perturb_(model: Any, seed: int) -> int:
    """Perturb a model's floating parameters and buffers in place, deterministically; how many changed.

    All-zero tensors (biases, running means) get small random values; tensors with no negative value
    (norm weights, running variances) are scaled by exp(0.3 * N(0,1)), staying positive; the rest move by
    a tenth of their spread. Integer buffers (num_batches_tracked) are left alone.
    """
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed + _PERTURB_SEED_OFFSET)
    changed = 0
    with torch.no_grad():
        tensors = [t for _, t in model.named_parameters()] + [t for _, t in model.named_buffers()]
        for t in tensors:
            if not t.is_floating_point() or t.numel() == 0:
                continue
            noise = torch.randn(t.shape, generator=g, dtype=torch.float32).to(device=t.device, dtype=t.dtype)
            if bool((t == 0).all()):
                t.add_(0.1 * noise)
            elif bool((t >= 0).all()):
                t.mul_(torch.exp(0.3 * noise.clamp(-3, 3)))
            else:
                spread = float(t.float().std()) if t.numel() > 1 else float(t.abs().max())
                t.add_((0.1 * (spread or 1.0)) * noise)
            changed += 1
    return changed


def _tensors(value: Any) -> list[Any]:
    import torch

    from kernelwright.hardware.verify import flatten_outputs

    return [v for v in flatten_outputs(value) if isinstance(v, torch.Tensor)]


def _map_tensors(value: Any, fn: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, list | tuple):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value


def _clone(value: Any) -> Any:
    return _map_tensors(value, lambda t: t.clone())


def _detach(value: Any) -> Any:
    return _map_tensors(value, lambda t: t.detach())


def _upcast(t: Any) -> Any:
    import torch

    if t.is_complex():
        return t.to(torch.complex128, copy=True)
    if t.is_floating_point():
        return t.to(torch.float64, copy=True)
    return t.clone()


def _bitwise_equal(a: Any, b: Any, chunk: int = 1 << 26) -> bool:
    """Same shape, dtype and bytes (NaN payloads included), compared a chunk of bytes at a time."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    x, y = a.detach().reshape(-1), b.detach().to(a.device).reshape(-1)
    if not (x.is_contiguous() and y.is_contiguous()):
        x, y = x.contiguous(), y.contiguous()
    if x.dtype != torch.bool:
        x, y = x.view(torch.uint8), y.view(torch.uint8)
        if x.numel() % 8 == 0:  # the same bytes, compared eight at a time
            x, y = x.view(torch.int64), y.view(torch.int64)
    return all(bool(torch.equal(x[i : i + chunk], y[i : i + chunk])) for i in range(0, x.numel(), chunk))


def _out_of_memory(exc: BaseException) -> bool:
    import torch

    from kernelwright.hardware.failures import exception_chain

    return any(isinstance(e, torch.OutOfMemoryError) for e in exception_chain(exc))


# ------------------------------------------------------------------------------------------ the judge
class Judge:
    """Runs jobs; holds the caches that make warm evaluation fast."""

    def __init__(self, conn: Connection, device: str, tmpdir: str) -> None:
        import torch
        import triton

        self.conn = conn
        self.torch = torch
        self.device = device
        self.tmpdir = tmpdir
        self.tasks: OrderedDict[str, _TaskState] = OrderedDict()
        if device == "cuda":
            torch.cuda.init()
            self.device_name = torch.cuda.get_device_name(0)
        else:
            self.device_name = "cpu (Triton interpreter)"
        self.interpret = os.environ.get("TRITON_INTERPRET") == "1"
        self.versions = Versions(
            torch=torch.__version__,
            triton=triton.__version__,
            python=sys.version.split()[0],
            cuda=torch.version.cuda if device == "cuda" else None,
        )
        self.target, self.target_profile = self._detect_target()
        gpu = os.environ.get("CUDA_VISIBLE_DEVICES") if device == "cuda" else None
        self.forkserver = ForkServer(device, gpu, tmpdir)
        self.forkserver._start()  # pay for the imports now, not in the first job
        self._flush_buf: Any = None
        self.ipc_usable = device == "cuda"
        """Lend device buffers to candidate processes through CUDA IPC (until it fails before it ever worked)."""
        self.ipc_worked = False

    def _detect_target(self) -> tuple[str, dict[str, Any] | None]:
        fallback = "cpu-interpreter" if self.device == "cpu" else self.device_name
        try:
            from kernelwright.hardware.targets import detect_target

            target = detect_target(self.device)
        except Exception as exc:  # an unknown device must not stop evaluation; its name still identifies it
            print(f"detect_target failed: {exc}", file=sys.stderr)
            return fallback, None
        return target.name, target.model_dump(mode="json")

    def info(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "device": self.device,
            "device_name": self.device_name,
            "target": self.target,
            "target_profile": self.target_profile,
            "versions": self.versions.model_dump(),
            "interpret": self.interpret,
        }

    # ----------------------------------------------------------------- protocol with the pool
    def serve(self) -> None:
        self.conn.send(("ready", self.info()))
        while True:
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                return
            if msg[0] == "stop":
                return
            if msg[0] == "eval":
                job = msg[1]
                result, restart = self.run_job(job)
                self.conn.send(("result", job["job_id"], result.model_dump(mode="json"), restart))
                if restart:
                    return

    def _stage(self, job_id: int, stage: str) -> None:
        self.conn.send(("stage", job_id, stage))
        self._stage_name = stage
        self._stage_deadline = time.monotonic() + self._cfg.stage_timeout(stage)
        if self._proc is not None:
            self._proc.limit_s = self._cfg.stage_timeout(stage)

    def _remaining(self) -> float:
        return self._stage_deadline - time.monotonic()

    # ----------------------------------------------------------------- one job
    def run_job(self, job: dict[str, Any]) -> tuple[EvalResult, bool]:
        cfg = EvalConfig.model_validate(job["config"])
        self._cfg = cfg
        res = EvalResult(stage="compile", precision=cfg.precision, device=self.device_name,
                         target=self.target, versions=self.versions)  # fmt: skip
        res.extra["notes"] = []
        self._restart = False
        self._proc: CandidateProcess | None = None
        self._phases: dict[str, float] = {}
        self._peaks: dict[str, int] = {}
        self._fp64_budget_s = cfg.stage_timeout("reference") * _FP64_BUDGET_SHARE
        os.ftruncate(1, 0)  # the log holds this job's output only (stdout and stderr share it, O_APPEND)
        if self.device == "cuda":
            self.torch.cuda.reset_peak_memory_stats()
        try:
            self._apply_precision(cfg.precision)
            self._run(job, cfg, res)
        except _Stop:
            pass
        except Exception as exc:
            # A CUDA error in the judge's own work poisons its context: it must be replaced.
            self._restart = classify_exception(exc) == "crash"
            res.correct = False
            res.error_kind = "harness_error"
            res.error = tail(f"the harness failed: {traceback.format_exc()}")
        finally:
            if self._proc is not None:
                res.extra["confinement"] = self._proc.info.get("confinement")
                t0 = time.perf_counter()
                self._proc.close()
                self._phases.update({f"candidate {k}": v for k, v in self._proc.spent.items()})
                self._peaks = dict(self._proc.peaks)
                self._phases["candidate close"] = time.perf_counter() - t0
                self._proc = None
            res.extra["phases_s"] = {k: round(v, 4) for k, v in self._phases.items()}
            if self.device == "cuda":  # the judge's own share of the device memory this job needed
                memory = res.extra.setdefault("memory", {})
                memory["judge_peak_allocated_bytes"] = int(self.torch.cuda.max_memory_allocated())
                memory["judge_peak_reserved_bytes"] = int(self.torch.cuda.max_memory_reserved())
                if self._peaks:
                    memory["candidate_reported_peak_allocated_bytes"] = dict(self._peaks)
                self.torch.cuda.empty_cache()
        return res, self._restart

    def _fail(self, res: EvalResult, stage: str, kind: str, error: str) -> NoReturn:
        res.correct = False
        res.stage = stage  # type: ignore[assignment]
        res.error_kind = kind if kind in _ERROR_KINDS else "runtime_error"  # type: ignore[assignment]
        res.error = tail(error)
        raise _Stop

    def _apply_precision(self, precision: str) -> None:
        """TF32 for matmul and cuDNN conv only where the precision mode allows it, reference included."""
        tf32 = precision != "strict"
        self.torch.set_float32_matmul_precision("high" if tf32 else "highest")
        self.torch.backends.cudnn.allow_tf32 = tf32

    def _task(self, job: dict[str, Any]) -> _TaskState:
        from kernelwright.tasks import exec_task_module

        digest = hashlib.sha256(job["task_source"].encode()).hexdigest()[:16]
        state = self.tasks.get(digest)
        if state is None:
            state = _TaskState(
                exec_task_module(job["task_source"], job["task_name"]), job["task_name"], digest
            )
            state.module.__dict__["__kw_source__"] = job["task_source"]
            self.tasks[digest] = state
            while len(self.tasks) > _TASK_CACHE_SIZE:
                self._drop(self.tasks.popitem(last=False)[1])
        self.tasks.move_to_end(digest)
        return state

    def _shapes(self, task: _TaskState, cfg: EvalConfig) -> list[_Shape]:
        """The shapes verified here: the primary one, then a second one (see the module docstring)."""
        from kernelwright.tasks import exec_task_module, has_small_inputs
        from kernelwright.tasks.resize import first_input_shapes, footprint, shrink

        key = (self.device == "cuda", cfg.second_shape)
        if key in task.shapes:
            return task.shapes[key]
        module, source = task.module, task.module.__dict__["__kw_source__"]
        has_small = has_small_inputs(module)

        def derived(budget: int, avoid: list[list[int]] | None) -> _Shape | None:
            for b in (budget, budget // 4, budget * 4):
                resized = shrink(source, f"{task.name}_resized", max(b, 16))
                if resized is not None and resized.input_shapes != avoid:
                    return _Shape("derived", exec_task_module(resized.source, f"{task.name}_resized"), False,
                                  note=f"sizes {resized.description}")  # fmt: skip
            return None

        shapes: list[_Shape] = []
        if self.device == "cuda":
            shapes.append(_Shape("full", module, False))
            full = first_input_shapes(module, small=False) or []
            elements = sum(math.prod(s) for s in full)
            second = _Shape("small", module, True) if has_small else derived(max(4096, elements // 8), full)
        else:
            if has_small:
                shapes.append(_Shape("small", module, True))
            else:
                primary = derived(CPU_PRIMARY_ELEMENTS, None)
                shapes.append(primary if primary is not None else _Shape("full", module, False))
            first = first_input_shapes(shapes[0].module, small=shapes[0].small)
            # The second shape is no larger than the first: under the interpreter it costs as much again.
            own = footprint(shapes[0].module, small=shapes[0].small)
            elements = own.total // 4 if own is not None else CPU_SECOND_ELEMENTS
            second = derived(max(1024, min(CPU_SECOND_ELEMENTS, elements)), first)
            if second is not None and shapes[0].label == "derived":
                second.label = "derived2"
        if second is None:
            second = _sliced(shapes[0], self.device)
        if cfg.second_shape and second is not None:
            shapes.append(second)
        task.shapes[key] = shapes
        return shapes

    def _fits(self, task: _TaskState, shape: _Shape, res: EvalResult) -> None:
        """On a GPU, before anything of a task is built: will judging it fit the free device memory?

        A large task (own footprint over LEAN_BYTES) is judged lean: one trial's tensors at a time, no
        float64 reference unless lean_float64_fits, the candidate's output compared where it lies in the lent buffer, and the other
        tasks' state dropped first. It then holds about 2x the inputs, 3x the outputs and 2x the parameters
        (pristine inputs and the lent copy; expected output, lent output buffer and the candidate's own; the
        reference's parameters and the candidate's), plus ~1 GiB of contexts and L2-flush buffers:
        benchmarks/judge_memory.py measures it. If that does not fit: one harness_error that says what it
        needs and what is free, instead of a string of out-of-memory failures.
        """
        from kernelwright.tasks.resize import footprint

        if task.unfit is not None:
            raise _Unverifiable(task.unfit)
        if self.device != "cuda" or task.footprint_checked:
            return
        fp = footprint(shape.module, small=shape.small)
        task.footprint_checked = True
        if fp is None:
            return
        task.lean = fp.total > LEAN_BYTES
        if task.lean:
            for digest in [d for d in self.tasks if d != task.digest]:
                self._drop(self.tasks.pop(digest))
        need = 2 * fp.inputs + 3 * fp.outputs + 2 * fp.parameters + (1 << 30)
        free, _ = self.torch.cuda.mem_get_info()
        gib = 1 << 30
        task.lean_float64 = task.lean and lean_float64_fits(fp, free)
        res.extra["memory"] = {"footprint_bytes": fp.total, "needed_bytes": need, "free_bytes": free,
                               "lean": task.lean, "lean_float64": task.lean_float64}  # fmt: skip
        if need > free:
            task.unfit = (
                f"judging it needs about {need / gib:.1f} GiB of device memory (inputs {fp.inputs / gib:.2f} GiB, "
                f"outputs {fp.outputs / gib:.2f} GiB, parameters {fp.parameters / gib:.2f} GiB, about 2x, 3x and 2x "
                f"of them) and {free / gib:.1f} GiB are free on this GPU: sizes at about "
                f"{max(0.0, (free - gib) / max(need - gib, 1)):.0%} of the task's fit"
            )
            raise _Unverifiable(task.unfit)

    def _release_samples(self, ref: _Reference) -> None:
        """A large task's samples (inputs and expected outputs) dropped, and the memory given back to the GPU
        at once: the next tensors may be of other sizes, which the allocator's cached blocks would not fit."""
        ref.samples.clear()
        self.torch.cuda.empty_cache()

    def _drop(self, task: _TaskState) -> None:
        """Free a task's device state (references, samples, lent buffers)."""
        for ref in task.refs.values():
            if ref.exchange is not None:
                for buf in ref.exchange.inputs + ref.exchange.outputs:
                    buf.free()
        task.refs.clear()
        if self.device == "cuda":
            self.torch.cuda.empty_cache()

    def _reference(self, task: _TaskState, shape: _Shape, seed: int) -> _Reference:
        from kernelwright.tasks import task_init_inputs, task_model

        ref = task.refs.get((shape.label, seed))
        if ref is None:
            model = task_model(shape.module, small=shape.small, seed=seed, device=self.device)
            perturb_(model, seed)
            ref = _Reference(shape, task_init_inputs(shape.module, small=shape.small), model)
            if task.lean:  # a large task's small second shape still gets copies and a float64 reference
                from kernelwright.tasks.resize import footprint

                own = footprint(shape.module, small=shape.small)
                ref.lean = own is None or own.total > LEAN_BYTES
                ref.lean_float64 = ref.lean and task.lean_float64
            ref.state0 = {k: v.detach().clone() for k, v in model.state_dict().items()}
            ref.built_modes = {name: m.training for name, m in model.named_modules()}
            task.refs[(shape.label, seed)] = ref
        return ref

    def _inputs(self, ref: _Reference, seed: int) -> list[Any]:
        from kernelwright.tasks import task_inputs

        # A large task's inputs are drawn on the GPU itself (seconds on CPU at gigabytes).
        inputs = task_inputs(ref.shape.module, small=ref.shape.small, seed=seed, device=self.device,
                             on_device=ref.lean)  # fmt: skip
        return ref.shape.transform(inputs) if ref.shape.transform is not None else inputs

    def _sample(
        self, ref: _Reference, seed: int, precision: str, *, fp64: bool = True, mode: str = "train"
    ) -> _Sample:
        """Pristine inputs and the reference outputs for one trial in one mode, computed once per judge.
        The forward starts from the reference's starting state, which is restored after it."""
        from kernelwright.hardware.verify import needs_float64_reference

        key = (seed, precision, mode)
        sample = ref.samples.get(key)
        t32 = 0.0
        if sample is None:
            if ref.lean:  # one trial's tensors at a time
                self._release_samples(ref)
            inputs = self._inputs(ref, seed)
            # A large task runs the reference on the inputs themselves and draws them again if it wrote them.
            args = inputs if ref.lean else _clone(inputs)
            before = [fingerprint(t) for t in _tensors(args)] if ref.lean else []
            ref.restore(mode)
            t0 = time.perf_counter()
            with self.torch.no_grad():
                out = ref.model(*args)
            self._sync()
            t32 = time.perf_counter() - t0
            buffers = {k: v.detach().clone() for k, v in ref.model.named_buffers()}
            ref.restore("train")
            if ref.lean:
                changed = [fingerprint(t) for t in _tensors(args)] != before
                if changed:
                    inputs = self._inputs(ref, seed)
            else:
                changed = any(
                    not _bitwise_equal(a, b) for a, b in zip(_tensors(args), _tensors(inputs), strict=True)
                )
            sample = ref.samples[key] = _Sample(inputs, _detach(out), inputs_after=args if changed else None,
                                                buffers=buffers)  # fmt: skip
        if fp64 and sample.fp64_status is None:
            if ref.lean and not ref.lean_float64:
                sample.fp64_status = (
                    "unavailable: the task is too large for a float64 run within the memory bound"
                )
            elif not needs_float64_reference(sample.out, precision):  # type: ignore[arg-type]
                sample.fp64_status = (
                    f"not used: TF32 is on for the reference in {precision} precision"
                    if precision != "strict"
                    else "not used: no float32 output"
                )
            else:
                self._reference64(ref, sample, t32, mode)
        return sample

    def _modes(self, task: _TaskState, ref: _Reference, seed: int) -> None:
        """Which modes to verify in, from four runs of the reference on the same inputs: train and eval,
        each with two RNG seeds. Output that changes with the RNG seed in eval mode cannot be verified by
        value (harness_error: the search stops); in train mode only (dropout), it is verified in eval mode
        only; output that differs between train and eval, or buffers that forward updates, are verified in
        both (buffers compared too)."""
        from kernelwright.hardware.verify import compare_outputs

        if task.modes is not None:
            return
        inputs = self._inputs(ref, seed)
        runs: dict[tuple[str, int], tuple[Any, bool]] = {}
        for mode in ("train", "eval"):
            for rng in (1, 2):
                ref.restore(mode)
                self.torch.manual_seed(rng)
                with self.torch.no_grad():
                    out = _detach(ref.model(*_clone(inputs)))
                self._sync()
                updated = any(
                    not _bitwise_equal(v, ref.state0[k])
                    for k, v in ref.model.named_buffers()
                    if k in ref.state0
                )
                runs[(mode, rng)] = (out, updated)
        ref.restore("train")

        def same(a: Any, b: Any) -> bool:  # the loosest row: nondeterministic kernels (atomics) still agree
            return compare_outputs(a, b, "reduced").ok

        task.stateful = runs[("train", 1)][1] or runs[("eval", 1)][1]
        if not same(runs[("eval", 1)][0], runs[("eval", 2)][0]):
            raise _Unverifiable(
                "the reference's output changes with the random seed on the same inputs, in eval mode too "
                "(random numbers drawn in forward): it cannot be verified by value"
            )
        if not same(runs[("train", 1)][0], runs[("train", 2)][0]):
            task.modes = ["eval"]
            task.modes_note = "the reference is random in train mode (dropout?): verified in eval mode only"
        elif task.stateful or not same(runs[("train", 1)][0], runs[("eval", 1)][0]):
            task.modes = ["train", "eval"]
            task.modes_note = ("the reference behaves differently in train() and eval() or updates its buffers: "
                               "trials alternate between the two modes and buffers are compared after forward")  # fmt: skip
        else:
            task.modes = ["train"]

    def _reference64(self, ref: _Reference, sample: _Sample, t32: float, mode: str = "train") -> None:
        """Run a float64 copy of the reference model on upcast inputs; on failure say why, never raise."""
        torch = self.torch
        if ref.fp64_failure is not None:
            sample.fp64_status = ref.fp64_failure
            return
        estimate = ref.fp64_s if ref.fp64_s is not None else t32 * _FP64_COST_FACTOR
        if estimate > self._fp64_budget_s:
            sample.fp64_status = (
                f"unavailable: a float64 run would take ~{estimate:.3g} s, over its {self._fp64_budget_s:.3g} s "
                "share of the reference time limit"
            )
            return
        model64: Any = None
        t0 = time.perf_counter()
        try:
            ref.restore(mode)
            model64 = copy.deepcopy(ref.model).double()
            ref.restore("train")
            with torch.no_grad():
                out64 = model64(*_map_tensors(sample.inputs, _upcast))
            self._sync()
            sample.out64, sample.fp64_status = _detach(out64), "used"
        except Exception as exc:
            if _out_of_memory(exc):
                sample.fp64_status = "unavailable: out of memory"
                return
            if classify_exception(exc) == "crash":
                raise
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            sample.fp64_status = f"unavailable: {type(exc).__name__}: {first}"
        finally:
            del model64
            if self.device == "cuda" and sample.fp64_status != "used":
                torch.cuda.empty_cache()
            spent = time.perf_counter() - t0
            ref.fp64_s = spent
            if sample.fp64_status != "used":
                ref.fp64_failure = sample.fp64_status
            self._fp64_budget_s = max(0.0, self._fp64_budget_s - spent)

    def _reference_ops(self, task: _TaskState, ref: _Reference, sample: _Sample) -> set[str]:
        """The compute ops the reference dispatches (recorded once per task, on its smallest shape)."""
        from torch.utils._python_dispatch import _pop_mode, _push_mode

        from kernelwright.hardware.evidence import Recorder, RecordingMode, compute_ops

        if task.reference_ops is None:
            rec = Recorder()
            rec.start()
            _push_mode(RecordingMode(rec))
            try:
                with self.torch.no_grad():
                    ref.model(*_clone(sample.inputs))
            finally:
                _pop_mode()
                rec.stop()
                ref.restore("train")
            task.reference_ops = set(compute_ops(rec.events))
        return task.reference_ops

    def _sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    # ----------------------------------------------------------------- the job's stages
    def _run(self, job: dict[str, Any], cfg: EvalConfig, res: EvalResult) -> None:
        job_id = job["job_id"]
        res.torch_ops_remaining = list(job.get("torch_ops_remaining", []))
        notes: list[str] = res.extra["notes"]
        notes.append(
            f"precision {cfg.precision}: TF32 {'on' if cfg.precision != 'strict' else 'off'} for matmul and "
            "cuDNN conv, reference included"
        )
        # The reference first, under its own time limit: a slow reference is not the candidate's fault.
        self._stage(job_id, "reference")
        t_ref = time.perf_counter()
        try:
            task = self._task(job)
            shapes = self._shapes(task, cfg)
            self._fits(task, shapes[0], res)
            refs = {s.label: self._reference(task, s, cfg.seed) for s in shapes}
            smallest = refs[shapes[-1].label]
            self._modes(task, smallest, cfg.seed)
            modes = task.modes or ["train"]
            for s in shapes:
                n = cfg.trials if s is shapes[0] else min(cfg.trials, cfg.second_shape_trials)
                for trial in range(n if not refs[s.label].lean else 0):  # a large task: on demand
                    self._sample(refs[s.label], cfg.seed + trial, cfg.precision, fp64=cfg.reference_fp64,
                                 mode=modes[trial % len(modes)])  # fmt: skip
            ref_ops = self._reference_ops(task, smallest, self._sample(smallest, cfg.seed, cfg.precision,
                                                                       fp64=cfg.reference_fp64, mode=modes[0]))  # fmt: skip
        except _Unverifiable as exc:
            self._fail(res, "compile", "harness_error", f"the task cannot be judged here: {exc}")
        except Exception as exc:
            self._restart = classify_exception(exc) == "crash"
            self._fail(res, "compile", "harness_error", f"the reference could not run: {exc}")
        origin = {"full": "get_inputs()", "small": "get_small_inputs()"}
        for s in shapes:
            notes.append(f"verified on {s.label} inputs ({s.note or origin.get(s.label, '')})")
        if len(shapes) == 1:
            notes.append("no second input shape: the task has no get_small_inputs() and its size constants "
                         "could not be changed" if cfg.second_shape else "second shape switched off")  # fmt: skip
        notes.append(PARAMETERS_NOTE)
        if task.modes_note:
            notes.append(task.modes_note)

        self._phases["reference"] = time.perf_counter() - t_ref
        self._stage(job_id, "compile")
        memory = None
        if self.device == "cpu":  # the candidate process's address-space limit
            footprint = max(self._footprint(refs[s.label], cfg) for s in shapes)
            memory = _CPU_MEMORY_BASE + _CPU_MEMORY_FACTOR * footprint
        try:
            self._proc = proc = CandidateProcess(self.forkserver)
            proc.limit_s = cfg.stage_timeout("compile")
        except Exception as exc:
            self._fail(res, "compile", "harness_error", f"could not start a candidate process: {exc}")
        try:
            proc.wait_ready(min(self._remaining(), _CANDIDATE_START_S))
            self._load(proc, job, shapes, refs, cfg, res, memory)
            for shp in shapes:
                first = self._sample(refs[shp.label], cfg.seed, cfg.precision, mode=modes[0])
                self._attach(proc, refs[shp.label], first, res)
            del first  # a large task holds one trial's tensors at a time (ref.samples), not two
            self._verify(job_id, proc, task, shapes, refs, ref_ops, cfg, res)
            if self.device != "cuda" or not cfg.time:
                proc.in_step(max(self._remaining(), 5.0))
                res.stage = "done"
                res.timing_meaningful = False
                res.timing_note = (
                    "not timed: the Triton interpreter on CPU says nothing about GPU speed"
                    if self.device != "cuda"
                    else "not timed (time=False)"
                )
                return
            self._time(job_id, proc, task, refs[shapes[0].label], cfg, res)
        except _CandidateGone as gone:
            stage = {"compile": "compile", "correctness": "correctness", "timing": "timing",
                     "baseline": "timing"}.get(self._stage_name, "compile")  # fmt: skip
            self._fail(res, stage, gone.kind, gone.text)

    def _footprint(self, ref: _Reference, cfg: EvalConfig) -> int:
        sample = next(v for k, v in ref.samples.items() if k[:2] == (cfg.seed, cfg.precision))
        tensors = _tensors(sample.inputs) + _tensors(sample.out) + list(ref.model.state_dict().values())
        return sum(t.numel() * t.element_size() for t in tensors)

    def _load(self, proc: CandidateProcess, job: dict[str, Any], shapes: list[_Shape], refs: dict[str, _Reference],
              cfg: EvalConfig, res: EvalResult, memory_bytes: int | None) -> None:  # fmt: skip
        tensors: list[Any] = []
        models = []
        for s in shapes:
            ref = refs[s.label]
            try:
                init = encode_value(list(ref.init_inputs), tensors)
            except TypeError as exc:
                self._fail(
                    res, "compile", "harness_error", f"the task's constructor arguments cannot be sent: {exc}"
                )
            state = []
            for name, t in ref.model.state_dict().items():
                tensors.append(t)
                state.append([name, len(tensors) - 1])
            models.append({"key": s.label, "init": init, "state": state})
        shared = [SharedTensor.create(t, "kw-state") for t in tensors]
        try:
            reply, fds = proc.request({"op": "load", "source": job["candidate_source"], "seed": cfg.seed,
                                       "models": models, "memory_bytes": memory_bytes},
                                      shared, self._remaining(), "compile")  # fmt: skip
        finally:
            for lent in shared:
                lent.close()
        close_fds(fds)
        self._check_reply(reply, "loaded", res)
        if isinstance(proc.info.get("confinement"), dict):
            proc.info["confinement"]["memory_limit_bytes"] = reply.get("memory_limit_bytes")

    def _check_reply(self, reply: dict[str, Any], expected: str, res: EvalResult) -> None:
        op = reply.get("op")
        if op == "failed":
            stage = reply.get("stage") if reply.get("stage") in ("parse", "compile", "run", "correctness",
                                                                  "timing") else "run"  # fmt: skip
            kind = str(reply.get("kind"))
            if (
                kind == "harness_error"
            ):  # the candidate side cannot blame the harness on the candidate's behalf
                kind = "runtime_error"
            self._fail(res, str(stage), kind, str(reply.get("text", ""))[-2000:])
        if op != expected:
            self._fail(
                res, "run", "forbidden", f"the candidate process answered {op!r} where {expected!r} was due"
            )

    def _call(self, proc: CandidateProcess, ref: _Reference, sample: _Sample, stage: str, res: EvalResult,
              *, evidence: bool = False, keep: bool = False, refill: bool = False, mode: str = "train",
              reset: bool = False) -> tuple[Any, dict[str, Any]]:  # fmt: skip
        """One forward in the candidate process on `sample`'s inputs; (output, reply). Checks that the
        inputs are unchanged (where the judge can see them) and the output is sealed and well formed."""
        tensors: list[Any] = []
        args = encode_value(list(sample.inputs), tensors)
        exchange = ref.exchange if ref.shape.label in proc.attached else None
        shared = [] if exchange is not None else [SharedTensor.create(t, "kw-input") for t in tensors]
        if exchange is not None:  # the trial's pristine inputs into the lent buffers, on the device
            for buf, t in zip(exchange.inputs, tensors, strict=True):
                buf.tensor.copy_(t)
            self._sync()
        poison = [t.numel() * t.element_size() for t in _tensors(sample.out)]
        try:
            reply, fds = proc.request(
                {"op": "call", "model": ref.shape.label, "args": args, "evidence": evidence, "stage": stage,
                 "poison_bytes": poison, "keep": keep, "refill": refill, "exchange": exchange is not None,
                 "mode": mode, "reset": reset, "buffers": sorted(sample.buffers) if reset else []},
                shared, self._remaining(), stage,
            )  # fmt: skip
            try:
                self._check_reply(reply, "called", res)
                seen = (
                    [b.tensor for b in exchange.inputs]
                    if exchange is not None
                    else [x.tensor for x in shared]
                )
                if seen:
                    expected = sample.inputs_after if sample.inputs_after is not None else sample.inputs
                    for i, (got, want) in enumerate(zip(seen, _tensors(expected), strict=True)):
                        if not _bitwise_equal(got, want):
                            self._fail(res, stage, "forbidden",
                                       f"forward wrote into input {i}; inputs must be left as they were"
                                       + (" (or changed exactly as the reference changes them)"
                                          if sample.inputs_after is not None else ""))  # fmt: skip
                state_descs = reply.get("state") or []
                if not isinstance(state_descs, list) or len(state_descs) > len(fds):
                    self._fail(res, stage, "forbidden", "the candidate process sent a malformed buffer list")
                n_out = len(fds) - len(state_descs)
                if exchange is not None and reply.get("exchanged") is True and n_out == 0:
                    out = self._from_exchange(reply.get("structure"), exchange, res, copy=not ref.lean)
                else:
                    out = self._rebuild(reply.get("structure"), fds[:n_out], res)
                if reset:
                    self._check_buffers(state_descs, fds[n_out:], sample, mode, stage, res)
            finally:
                close_fds(fds)
        finally:
            for x in shared:
                x.close()
        return out, reply

    def _check_buffers(self, descs: list[Any], fds: list[int], sample: _Sample, mode: str, stage: str,
                       res: EvalResult) -> None:  # fmt: skip
        """The candidate's buffers after forward (running stats) against the reference's, every one."""
        from kernelwright.hardware.verify import compare_tensor

        got: dict[str, Any] = {}
        try:
            for desc, fd in zip(descs, fds, strict=True):
                shape, dtype = parse_description(desc)
                check_sealed(fd, tensor_nbytes(shape, dtype))
                st = SharedTensor(os.dup(fd), shape, dtype, writable=False)
                got[str(desc.get("name"))] = st.tensor.clone()
                st.close()
        except ProtocolError as exc:
            self._fail(res, stage, "forbidden", f"the candidate process sent malformed buffers: {exc}")
        for name, want in sample.buffers.items():
            have = got.get(name)
            if have is None:
                self._fail(
                    res, "correctness", "shape_mismatch", f"ModelNew has no buffer {name} after forward"
                )
            have = have.to(want.device)
            if have.shape != want.shape:
                self._fail(res, "correctness", "shape_mismatch",
                           f"buffer {name} has shape {list(have.shape)} after forward, expected {list(want.shape)}")  # fmt: skip
            cmp = compare_tensor(have.to(want.dtype), want, "strict", label=f"buffer {name}")
            if not cmp.ok:
                self._fail(res, "correctness", "mismatch",
                           f"after a {mode}-mode forward, {cmp.report}\n(the reference's forward updates its "
                           "buffers in train mode, e.g. BatchNorm's running statistics; ModelNew must do the same, "
                           "and must use them in eval mode)")  # fmt: skip

    def _from_exchange(
        self, structure: Any, exchange: _Exchange, res: EvalResult, *, copy: bool = True
    ) -> Any:
        """The candidate's output, copied at once out of the lent output buffers into the judge's memory.
        Without `copy` (a large task): the lent buffers themselves, which the comparison reads a chunk at a
        time into its own float64 copies (hardware.verify._Pieces), so what is judged is still what the
        buffer held when it was read, at no extra output-sized copy."""
        try:
            descs = _tensor_descs(structure)
            if len(descs) != len(exchange.outputs):
                raise ProtocolError(f"{len(descs)} output tensors where {len(exchange.outputs)} were lent")
            tensors = []
            for desc, buf in zip(descs, exchange.outputs, strict=True):
                shape, dtype = parse_description(desc)
                if shape != buf.shape or dtype != buf.dtype or desc.get("device") != "cuda":
                    raise ProtocolError("an output said to be in a lent buffer does not fit it")
                tensors.append(buf.tensor.clone() if copy else buf.tensor)
            return decode_value(structure, tensors)
        except ProtocolError as exc:
            self._fail(
                res, "correctness", "forbidden", f"the candidate process sent a malformed output: {exc}"
            )

    def _attach(self, proc: CandidateProcess, ref: _Reference, sample: _Sample, res: EvalResult) -> None:
        """Lend this shape's device buffers to the candidate process (GPU with CUDA IPC); on failure the
        calls go through host shared memory, and the judge stops trying IPC if it never worked here."""
        if self.device != "cuda" or not self.ipc_usable:
            return
        try:
            if ref.exchange is None:
                from kernelwright.hardware.cuda_ipc import ExportedBuffer

                ref.exchange = _Exchange(
                    [ExportedBuffer(list(t.shape), t.dtype) for t in _tensors(sample.inputs)],
                    [ExportedBuffer(list(t.shape), t.dtype) for t in _tensors(sample.out)],
                )
            lent = [b.fd for b in ref.exchange.inputs + ref.exchange.outputs]
            reply, fds = proc.request({"op": "attach", "model": ref.shape.label, **ref.exchange.descriptions()}, [],
                                      self._remaining(), "compile", fds=lent)  # fmt: skip
            close_fds(fds)
        except (RuntimeError, OSError) as exc:
            self.ipc_usable = self.ipc_worked
            res.extra["notes"].append(f"CUDA IPC unavailable ({exc}); tensors staged through host memory")
            return
        if reply.get("op") == "attached":
            proc.attached.add(ref.shape.label)
            self.ipc_worked = True
        else:
            self.ipc_usable = self.ipc_worked
            res.extra["notes"].append(f"CUDA IPC refused in the candidate process ({str(reply.get('text'))[-600:]}); "
                                      "tensors staged through host memory")  # fmt: skip

    def _rebuild(self, structure: Any, fds: list[int], res: EvalResult) -> Any:
        """The candidate's output from its JSON structure and sealed memfds, as the judge's own tensors."""
        tensors: list[Any] = []
        try:
            descs = _tensor_descs(structure)
            if len(descs) != len(fds):
                raise ProtocolError(f"{len(fds)} output descriptors for {len(descs)} tensors")
            for desc, fd in zip(descs, fds, strict=True):
                shape, dtype = parse_description(desc)
                check_sealed(fd, tensor_nbytes(shape, dtype))
                st = SharedTensor(os.dup(fd), shape, dtype, writable=False)
                device = self.device if desc.get("device") == self.device else str(desc.get("device"))
                if device not in ("cpu", "cuda"):
                    raise ProtocolError(f"output on unknown device {device!r}")
                t = st.tensor.to(device, copy=True) if device != "cpu" else st.tensor.clone()
                st.close()
                tensors.append(t)
            return decode_value(structure, tensors)
        except ProtocolError as exc:
            self._fail(
                res, "correctness", "forbidden", f"the candidate process sent a malformed output: {exc}"
            )

    def _verify(self, job_id: int, proc: CandidateProcess, task: _TaskState, shapes: list[_Shape],
                refs: dict[str, _Reference], ref_ops: set[str], cfg: EvalConfig, res: EvalResult) -> None:  # fmt: skip
        from kernelwright.hardware.evidence import analyse
        from kernelwright.hardware.verify import compare_outputs

        first = True
        max_abs = max_rel = 0.0
        tolerances = []
        for s_index, shape in enumerate(shapes):
            ref = refs[shape.label]
            trials = cfg.trials if s_index == 0 else min(cfg.trials, cfg.second_shape_trials)
            for trial in range(trials):
                seed = cfg.seed + trial
                modes = task.modes or ["train"]
                mode = modes[trial % len(modes)]
                sample = self._sample(ref, seed, cfg.precision, fp64=cfg.reference_fp64, mode=mode)
                if trial == 0:
                    res.shapes_checked.append([list(t.shape) for t in _tensors(sample.inputs)])
                evidence = s_index == 0 and trial == 1
                out, reply = self._call(proc, ref, sample, "compile" if first else "correctness", res,
                                        evidence=evidence, mode=mode, reset=task.stateful)  # fmt: skip
                if first:
                    first = False
                    res.stage = "correctness"
                    self._stage(job_id, "correctness")
                ref64 = sample.out64 if cfg.reference_fp64 else None
                cmp = compare_outputs(
                    out, sample.out, cfg.precision, rtol=cfg.rtol, atol=cfg.atol, ref64=ref64
                )
                if trial == 0:
                    self._note_fp64(res, shape.label, sample if cfg.reference_fp64 else None, cmp.notes)
                res.trials = max(res.trials, trial + 1)
                if not cmp.ok:
                    res.max_abs_error, res.max_rel_error = cmp.max_abs_error, cmp.max_rel_error
                    res.mismatched = cmp.mismatched or None
                    res.tolerance = cmp.tolerances[-1] if cmp.tolerances else None
                    in_shapes = [list(t.shape) for t in _tensors(sample.inputs)]
                    in_mode = f", {mode} mode" if len(modes) > 1 or mode != "train" else ""
                    self._fail(res, "correctness", cmp.error_kind or "mismatch",
                               f"{cmp.report}\n({shape.label} inputs {in_shapes}, trial {trial + 1}/{trials}, "
                               f"seed {seed}{in_mode})")  # fmt: skip
                if evidence:
                    report = reply.get("evidence")
                    prov = analyse(report if isinstance(report, dict) else {}, ref_ops)
                    res.kernel_launches = prov.triton_launches
                    res.extra["torch_ops_in_source"] = list(res.torch_ops_remaining)
                    res.torch_ops_remaining = prov.torch_ops  # what ran, which the source scan only guessed
                    if not prov.ok:
                        self._fail(res, "run", prov.error_kind or "torch_fallback", prov.reason)
                    if self.device == "cuda" and isinstance(report, dict):
                        self._check_kernels(report, res)
                max_abs, max_rel = max(max_abs, cmp.max_abs_error), max(max_rel, cmp.max_rel_error)
                tolerances.extend(cmp.tolerances)
                del out, sample  # before the next trial's are built (a large task holds one at a time)
        res.max_abs_error, res.max_rel_error = max_abs, max_rel
        if tolerances:
            # The loosest row applied (largest effective atol, allowance included) bounded the verdict.
            res.tolerance = max(
                tolerances,
                key=lambda t: (
                    t.rtol,
                    t.atol * t.atol_scale + (t.allowance_factor or 0) * (t.reference_error or 0),
                ),
            )
        res.correct = True

    def _check_kernels(self, report: dict[str, Any], res: EvalResult) -> None:
        """GPU: library kernels the profiler saw in one forward must have a recorded torch op behind them."""
        kernels = report.get("kernels")
        launch_names = report.get("launch_names") or {}
        if not isinstance(kernels, dict) or "<profiler unavailable>" in kernels:
            res.extra.setdefault("notes", []).append("GPU profiler unavailable: kernels not cross-checked")
            return
        library = {k: v for k, v in kernels.items()
                   if isinstance(k, str) and k not in launch_names and not _is_transfer(k)}  # fmt: skip
        aten_events = [e for e in report.get("events", []) if isinstance(e, list) and e and e[0] == "aten"]
        res.extra["gpu_kernels"] = {"triton": sum(v for k, v in kernels.items() if k in launch_names),
                                    "library": sum(library.values())}  # fmt: skip
        if library and not aten_events:
            names = ", ".join(sorted(library)[:4])
            self._fail(res, "run", "forbidden", f"the GPU ran library kernels ({names}) that no recorded torch op "
                       "launched: work was done out of the harness's sight")  # fmt: skip

    def _note_fp64(
        self, res: EvalResult, shape_label: str, sample: _Sample | None, cmp_notes: list[str]
    ) -> None:
        """Say, once per input shape, what the values were compared against and with what allowance."""
        status = (sample and sample.fp64_status) or "not used: switched off (reference_fp64=False)"
        res.extra.setdefault("float64_reference", {})[shape_label] = status
        notes: list[str] = res.extra["notes"]
        if status.startswith("unavailable"):
            notes.append(
                f"{shape_label} inputs: float64 reference {status}; compared against the float32 reference "
                "alone (no reference-error allowance)"
            )
        notes.extend(f"{shape_label} inputs (trial 1): {n}" for n in cmp_notes)

    # ----------------------------------------------------------------- timing (GPU)
    def _flush(self) -> Any:
        if self._flush_buf is None:
            from kernelwright.hardware.timing import flush_bytes

            self._flush_buf = self.torch.empty(flush_bytes(0) // 4, dtype=self.torch.int32, device="cuda")
        return self._flush_buf

    def _time_eager(self, ref: _Reference, args: list[Any], reps: int, warmup: int) -> list[float]:
        t0 = time.perf_counter()
        try:
            return self._time_eager_calls(ref, args, reps, warmup)
        finally:
            self._phases["eager timing"] = self._phases.get("eager timing", 0.0) + time.perf_counter() - t0

    def _time_eager_calls(self, ref: _Reference, args: list[Any], reps: int, warmup: int) -> list[float]:
        torch = self.torch
        flush = self._flush()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        with torch.no_grad():
            for _ in range(warmup):
                flush.zero_()
                ref.model(*args)
            torch.cuda.synchronize()
            for i in range(reps):
                flush.zero_()
                starts[i].record()
                ref.model(*args)
                ends[i].record()
            torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]

    def _time(self, job_id: int, proc: CandidateProcess, task: _TaskState, ref: _Reference, cfg: EvalConfig,
              res: EvalResult) -> None:  # fmt: skip
        from kernelwright.hardware.timing import flush_bytes, summarize
        from kernelwright.hardware.verify import compare_outputs

        res.stage = "timing"
        self._stage(job_id, "timing")
        mode = (task.modes or ["train"])[0]
        sample = self._sample(ref, cfg.seed, cfg.precision, fp64=cfg.reference_fp64, mode=mode)
        # The timed inputs, kept on the device there; the model stays in `mode` while it is timed.
        self._call(proc, ref, sample, "timing", res, keep=True, mode=mode, reset=task.stateful)
        self._apply_precision(cfg.precision)
        fb = flush_bytes(0)
        label = ref.shape.label

        def cand(reps: int, warmup: int) -> list[float]:
            reply, fds = proc.request({"op": "time", "model": label, "reps": reps, "warmup": warmup,
                                       "flush_bytes": fb}, [], self._remaining(), "timing")  # fmt: skip
            close_fds(fds)
            self._check_reply(reply, "timed", res)
            samples = reply.get("samples")
            if not (isinstance(samples, list) and len(samples) == reps
                    and all(isinstance(x, float) and x >= 0 for x in samples)):  # fmt: skip
                self._fail(res, "timing", "forbidden", "the candidate process sent malformed timings")
            return samples

        args_r = _clone(sample.inputs) if sample.inputs_after is not None else sample.inputs
        if ref.lean:  # a large task: the reference's output is not needed while timing; free it first
            del sample
            self._release_samples(ref)
        ref.restore(mode)
        est_c = max(float(sorted(cand(5, 3))[2]), 1e-3)
        est_e = max(float(sorted(self._time_eager(ref, args_r, 5, 3))[2]), 1e-3)
        warm_c, warm_e = max(1, int(cfg.warmup_ms / est_c)), max(1, int(cfg.warmup_ms / est_e))
        cand(1, min(warm_c, 200))
        self._time_eager(ref, args_r, 1, min(warm_e, 200))
        k = int(min(200, max(1, cfg.rep_ms / _ROUNDS / max(est_c, est_e))))
        cand_samples: list[float] = []
        eager_samples: list[float] = []
        ratios: list[float] = []
        for _ in range(_ROUNDS):
            c = cand(k, 0)
            e = self._time_eager(ref, args_r, k, 0)
            cand_samples += c
            eager_samples += e
            ratios.append(float(sorted(e)[len(e) // 2] / max(sorted(c)[len(c) // 2], 1e-6)))
        ref.restore("train")
        c_stats, e_stats = summarize(cand_samples), summarize(eager_samples)
        self._wall_check(proc, label, fb, c_stats.median_ms, res)
        proc.in_step(max(self._remaining(), 5.0))
        if ref.lean:  # one trial's tensors at a time: the timed inputs go before the re-check's are drawn
            del args_r
            self.torch.cuda.empty_cache()
        # A candidate that remembers its answer per input tensor would look fast on the repeated calls
        # above: give the timed tensors new contents (a seed no trial used) and check the answer follows.
        other = self._sample(
            ref, cfg.seed + _RECHECK_SEED_OFFSET, cfg.precision, fp64=cfg.reference_fp64, mode=mode
        )
        out, _ = self._call(proc, ref, other, "timing", res, refill=True, mode=mode, reset=task.stateful)
        ref64 = other.out64 if cfg.reference_fp64 else None
        cmp = compare_outputs(out, other.out, cfg.precision, rtol=cfg.rtol, atol=cfg.atol, ref64=ref64)
        if not cmp.ok:
            self._fail(res, "timing", cmp.error_kind or "mismatch",
                       "the timed input tensors, given new contents, produced a wrong answer (a result remembered "
                       f"per input tensor?):\n{cmp.report}")  # fmt: skip
        res.runtime_ms, res.runtime_ci_ms = c_stats.median_ms, c_stats.ci_ms
        res.runtime_p20_ms, res.runtime_p80_ms = c_stats.p20_ms, c_stats.p80_ms
        res.eager_ms = e_stats.median_ms
        res.speedup_vs_eager, res.speedup_vs_eager_ci = paired_speedup_from_ratios(ratios)
        res.timing_reps = c_stats.reps
        res.timing_meaningful = True
        res.extra["eager_ci_ms"] = list(e_stats.ci_ms)
        res.timing_note = (
            f"CUDA events, L2 flushed, {_ROUNDS} alternating rounds of {k} calls (candidate in its own "
            f"process, eager in the judge), wall-clock cross-check passed, precision {cfg.precision}"
        )
        if cfg.compile_baseline:
            self.conn.send(("partial", job_id, res.model_dump(mode="json")))
            self._stage(job_id, "baseline")
            t0 = time.perf_counter()
            ref.restore(mode)
            inputs = other.inputs
            # The compiled reference needs inputs only: a large task's expected output makes room for its own.
            if ref.lean:
                del other, out
                self._release_samples(ref)
            res.compile_ms = self._compile_baseline(task, ref, inputs, cfg)
            ref.restore("train")
            self._phases["torch.compile baseline"] = time.perf_counter() - t0
            if res.compile_ms:
                res.speedup_vs_compile = res.compile_ms / res.runtime_ms
            else:
                res.timing_note += "; torch.compile baseline unavailable"
        res.stage = "done"

    def _wall_check(
        self, proc: CandidateProcess, label: str, fb: int, median_ms: float, res: EvalResult
    ) -> None:
        """The candidate's CUDA-event times against the judge's wall clock over a synchronised loop."""
        torch = self.torch
        n = int(min(1000, max(3, 50.0 / max(median_ms, 1e-3))))

        def loop(count: int) -> float:
            t0 = time.perf_counter()
            reply, fds = proc.request({"op": "loop", "model": label, "n": count, "flush_bytes": fb}, [],
                                      self._remaining(), "timing")  # fmt: skip
            elapsed = time.perf_counter() - t0
            close_fds(fds)
            self._check_reply(reply, "looped", res)
            return elapsed * 1000.0

        base = min(loop(0), loop(0))
        total = loop(n)
        flush = self._flush()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            flush.zero_()
        torch.cuda.synchronize()
        flush_ms = (time.perf_counter() - t0) * 1000.0 / n
        per_call = max(0.0, (total - base) / n - flush_ms)
        res.extra["wall_ms_per_call"] = per_call
        if median_ms < per_call / 2 - _WALL_SLACK_MS:
            self._fail(res, "timing", "forbidden",
                       f"the candidate's CUDA-event times (median {median_ms:.4g} ms) disagree with the judge's "
                       f"wall clock over a synchronised loop of {n} calls ({per_call:.4g} ms per call): timing "
                       "was tampered with, or work ran outside the timed stream")  # fmt: skip

    def _compile_baseline(
        self, task: _TaskState, ref: _Reference, inputs: list[Any], cfg: EvalConfig
    ) -> float | None:
        """torch.compile'd reference time, once per (task, shapes, precision) per judge, cached on disk."""
        from kernelwright.hardware.timing import BaselineCache, bench_interleaved, summarize

        torch = self.torch
        shapes = "x".join(str(list(t.shape)) for t in _tensors(inputs))
        key = f"{task.digest}|{shapes}|{cfg.precision}|perturbed"
        if key in task.baseline_ms:
            return task.baseline_ms[key]
        scope = f"{self.device_name}|torch {torch.__version__}|triton {self.versions.triton}"
        cache = BaselineCache()
        entry = cache.get(scope, key)
        if entry is not None:
            task.baseline_ms[key] = entry.get("compile_ms")
            return task.baseline_ms[key]
        import torch._dynamo
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = 1  # no compile subprocesses inside a judge that may be killed
        args = inputs if ref.lean else _clone(inputs)  # a large task's inputs are not used after this
        value: float | None
        try:
            compiled = torch.compile(ref.model)
            with torch.no_grad():
                compiled(*args)
                torch.cuda.synchronize()
                samples = bench_interleaved({"compiled": lambda: compiled(*args)}, warmup_ms=cfg.warmup_ms,
                                            rep_ms=cfg.rep_ms)  # fmt: skip
            value = summarize(samples["compiled"]).median_ms
            cache.put(scope, key, {"compile_ms": value, "task": task.name, "time": time.time()})
        except Exception as exc:  # the baseline failing is not the candidate's fault; the result says so
            print(f"torch.compile baseline failed: {exc}", file=sys.stderr)
            value = None
        finally:
            torch._dynamo.reset()
        task.baseline_ms[key] = value
        return value


def paired_speedup_from_ratios(ratios: list[float]) -> tuple[float, tuple[float, float]]:
    """Median of per-round eager/candidate ratios and its bootstrap interval."""
    import numpy as np

    from kernelwright.hardware.timing import bootstrap_median_ci

    arr = np.asarray(ratios, dtype=np.float64)
    return float(np.median(arr)), bootstrap_median_ci(arr)


def _is_transfer(kernel: str) -> bool:
    low = kernel.lower()
    return "memcpy" in low or "memset" in low


def _tensor_descs(structure: Any, depth: int = 0) -> list[dict[str, Any]]:
    """The tensor entries of an encoded output structure, in index order; ProtocolError if inconsistent."""
    found: list[dict[str, Any]] = []

    def walk(v: Any, d: int) -> None:
        if d > 16 or not isinstance(v, dict):
            raise ProtocolError("malformed output structure")
        if "T" in v:
            found.append(v)
        for tag in ("U", "L"):
            if tag in v:
                if not isinstance(v[tag], list):
                    raise ProtocolError("malformed output structure")
                for x in v[tag]:
                    walk(x, d + 1)

    walk(structure, depth)
    if [d.get("T") for d in found] != list(range(len(found))):
        raise ProtocolError("output tensors are not numbered in order")
    return found


def _watch_parent(parent_pid: int, tmpdir: str) -> None:
    """Exit when the pool is gone (a second line of defence beside PR_SET_PDEATHSIG)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            shutil.rmtree(tmpdir, ignore_errors=True)
            os._exit(3)


def main(argv: list[str]) -> None:
    fd, device, tmpdir, parent_pid = int(argv[0]), argv[1], argv[2], int(argv[3])
    die_with_parent()
    if os.getppid() != parent_pid:
        os._exit(3)
    # A candidate cannot reach this process (it runs in its own sandbox), but if one signals it anyway
    # the judge keeps going: only SIGKILL (from its pool) ends it.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
    conn = Connection(fd)
    faulthandler.enable(file=sys.stderr, all_threads=False)
    threading.Thread(target=_watch_parent, args=(parent_pid, tmpdir), daemon=True).start()
    judge: Judge | None = None
    try:
        try:
            judge = Judge(conn, device, tmpdir)
        except Exception:
            traceback.print_exc()
            conn.send(("failed", traceback.format_exc()))
            return
        judge.serve()
    except OSError:  # the pool closed its end: it is gone or done with this judge
        pass
    finally:
        if judge is not None:
            judge.forkserver.stop()
        if os.getppid() != parent_pid:
            shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
