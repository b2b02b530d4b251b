"""The candidate side of an evaluation: one confined process that imports one candidate and runs it.

A fork of hardware.isolation.forkserver (which has already imported torch and triton) becomes this process,
confines itself (hardware.isolation.confine), installs the evidence recorder (hardware.judge.evidence), and only then
imports the candidate. It holds nothing worth stealing: it is sent the candidate's source, the
constructor arguments, the reference's (perturbed) parameters and each call's inputs, never an
expected output, and it cannot issue a verdict: it answers the judge's requests with plain JSON and
sealed shared-memory tensors (hardware.isolation.channel), which the judge checks for itself. It serves one
candidate and is then killed with every process it started.

Requests (JSON, from the judge) and answers:
- load: set torch's float32 precision switches as the judge set them for the reference (cuDNN TF32 and
  float32 matmul precision: strict turns both off, whereas torch's default lets cuDNN convolutions use
  TF32), write and import the candidate, build ModelNew for each set of constructor arguments with
  torch seeded as for the reference, load the reference's state_dict into it -> loaded | failed;
- call: run forward once on the given inputs (poisoned memory, recorded as evidence: the judge asks
  for it on every call, so no call it reads is one the candidate could tell unwatched; on a GPU one of
  them also asks for the profiler's view of one more forward), check the output's structure and types,
  return each output tensor in a sealed memfd -> called | failed;
- time (GPU): warm-up, then timed calls with CUDA events and an L2 flush before each -> timed;
- loop (GPU): n calls and a device-wide synchronize, for the judge's wall clock -> looped;
- exit.

Functions the harness relies on are captured before the candidate is imported, from C types whose
attributes cannot be replaced where possible, so that a candidate patching torch's Python modules
does not change what the harness measures. What it cannot prevent is listed in the README.

Here: the protocol, loading the candidate and the call request; the functions captured before the
candidate is imported, the guarded forward and its checks are in hardware.candidate.guard (Captured,
ForwardGuard), the timing requests in hardware.candidate.timing (TimedCalls); the Runner composes them.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import os
import sys
from typing import Any

from kernelwright.hardware.candidate import tripwires
from kernelwright.hardware.candidate.guard import Captured, Failed, ForwardGuard, fail
from kernelwright.hardware.candidate.timing import TimedCalls
from kernelwright.hardware.failures import classify_exception, format_exception, harness_failure, tail
from kernelwright.hardware.isolation.channel import (
    Channel,
    ChannelClosed,
    ProtocolError,
    SharedTensor,
    close_fds,
    decode_value,
    describe_tensor,
    parse_description,
    tensor_to_memfd,
)
from kernelwright.hardware.isolation.confine import Confinement
from kernelwright.hardware.isolation.memory_cap import cap_memory
from kernelwright.hardware.judge.evidence import Recorder, install_launch_hooks
from kernelwright.hardware.judge.fingerprint import FingerprintKey

CANDIDATE_MODULE = "candidate"


class Runner:
    """Serves one candidate's requests on `chan` (see the module docstring): loading and calls here, the
    guarded forward in `guard` (hardware.candidate.guard), the timing requests in `timed`
    (hardware.candidate.timing)."""

    def __init__(self, chan: Channel, device: str, private_dir: str, confinement: Confinement) -> None:
        import torch
        import triton

        self.torch = torch
        self.chan = chan
        self.device = device
        self.private_dir = private_dir
        self.confinement = confinement
        self.cuda = device == "cuda"
        # Captured before any candidate code exists (see the module docstring).
        self.captured = Captured.capture(torch, self.cuda)
        if self.cuda:
            self.device_name = torch.cuda.get_device_name(0)
        else:
            self.device_name = "cpu (Triton interpreter)"
        self.recorder = Recorder(sync=self.captured.sync)
        hooks = install_launch_hooks(self.recorder)
        if self.cuda:  # before any candidate exists (the process may be waiting as a standby)
            from kernelwright.hardware.isolation.warmup import warm_up_device

            warm_up_device()
        self.path = os.path.join(private_dir, f"{CANDIDATE_MODULE}.py")
        # After the harness's captures (Captured, the recorder's hooks): they keep the originals.
        self.guard = ForwardGuard(torch, self.cuda, self.captured, self.recorder, hooks, self.path,
                                  tripwires.installed(self.path))  # fmt: skip
        self.versions = {"torch": torch.__version__, "triton": triton.__version__,
                         "python": sys.version.split()[0],
                         "cuda": torch.version.cuda if self.cuda else None}  # fmt: skip
        self.models: dict[str, Any] = {}
        self.timing_args: dict[str, list[Any]] = {}
        """Per shape, forward's arguments as timed (kept by a call with keep=True)."""
        self.staged: dict[str, list[Any]] = {}
        """Per shape, the device copies of staged inputs that a refill overwrites in place."""
        self.exchange: dict[str, dict[str, list[Any]]] = {}
        """Per shape, the judge's device buffers this process opened (inputs, outputs)."""
        self.initial_state: dict[str, dict[str, Any]] = {}
        self.built_modes: dict[str, dict[str, bool]] = {}
        """Per shape, each submodule's training flag as ModelNew's constructor left it ("train" mode)."""
        self.timed = TimedCalls(self.guard, self.models, self.timing_args)

    # ------------------------------------------------------------------ protocol
    def serve(self) -> None:
        self.chan.send({"op": "ready", "pid": os.getpid(), "device_name": self.device_name,
                        "versions": self.versions, "confinement": self.confinement.model_dump()})  # fmt: skip
        while True:
            try:
                got = self.chan.recv()
            except ChannelClosed:
                return
            except ProtocolError as exc:  # said in output.log, which the judge shows when this process ends
                print(f"the candidate-side runner rejected a request from the judge: {exc}", file=sys.stderr)
                return
            if got is None:
                continue
            msg, fds = got
            op = msg.get("op")
            if op == "exit":
                close_fds(fds)
                return
            if op == "ping":
                close_fds(fds)
                self.chan.send({"op": "pong"})
                continue
            out_fds: list[int] = []
            if self.cuda:
                self.torch.cuda.reset_peak_memory_stats()
            try:
                handlers = {"load": self.load, "attach": self.attach, "call": self.call, "time": self.timed.time,
                            "loop": self.timed.loop}  # fmt: skip
                handler = handlers.get(str(op))
                if handler is None:
                    close_fds(fds)
                    fail("compile", "harness_error", f"unknown request {op!r}")
                reply, out_fds = handler(msg, fds)
            except Failed as f:
                reply = {"op": "failed", "stage": f.stage, "kind": f.kind, "text": f.text}
            except Exception as exc:  # the harness's own fault, reported as such (unless a tripwire's)
                if (problem := self.guard.tripwires and self.guard.tripwires.problem()) is not None:
                    reply = {
                        "op": "failed",
                        "stage": "run",
                        "kind": "forbidden",
                        "text": tail(f"{op}: {problem}"),
                    }
                    self.chan.send(reply, out_fds)
                    continue

                reply = {"op": "failed", "stage": "compile", "kind": "harness_error",
                         "text": harness_failure("candidate-side harness", exc)}  # fmt: skip
                del exc
            if self.cuda and isinstance(reply, dict):  # a diagnosis the judge reports, never trusts
                reply["device_peak_bytes"] = int(self.torch.cuda.max_memory_allocated())
            self.chan.send(reply, out_fds)
            close_fds(out_fds)

    def _shared(self, msg: dict[str, Any], fds: list[int], *, writable: bool) -> list[SharedTensor]:
        descs = msg.get("tensors", [])
        if not isinstance(descs, list) or len(descs) != len(fds):
            close_fds(fds)
            raise ProtocolError("tensor descriptions and descriptors do not match")
        return [
            SharedTensor(fd, *parse_description(d), writable=writable)
            for d, fd in zip(descs, fds, strict=True)
        ]

    # ------------------------------------------------------------------ load
    def load(self, msg: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        torch = self.torch
        shared = self._shared(msg, fds, writable=False)
        tensors = [s.tensor for s in shared]
        limit = None
        if self.cuda:  # the L2-flush buffer first: taken later, it would be split off a cached output block
            from kernelwright.hardware.timing import (
                flush_bytes,  # and the next output would need a second block
            )

            self.timed.flush(flush_bytes(torch.cuda.current_device()))
        if msg.get("memory_bytes") and not self.cuda:  # a CUDA context needs far more address space
            limit = cap_memory(self.confinement, int(msg["memory_bytes"]))
        self.guard.apply_precision(str(msg.get("precision", "strict")))
        with open(self.path, "w") as f:
            f.write(msg["source"])
        spec = importlib.util.spec_from_file_location(CANDIDATE_MODULE, self.path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[CANDIDATE_MODULE] = module  # triton and dataclasses look modules up by name
        try:
            spec.loader.exec_module(module)
        except SyntaxError as exc:
            fail("parse", "syntax_error", format_exception(exc, self.path))
        except BaseException as exc:  # noqa: B036 - SystemExit at import is a failed import too
            self.guard.check_tripwires("importing the candidate")
            kind = classify_exception(exc) if isinstance(exc, Exception) else "import_error"
            fail("compile", "import_error" if kind == "runtime_error" else kind,
                  f"importing the candidate failed: {format_exception(exc, self.path)}")  # fmt: skip
        self.guard.check_threads("importing the candidate")
        self.guard.check_precision("importing the candidate", "compile")
        self.guard.module = module
        model_cls = getattr(module, "ModelNew", None)
        if not isinstance(model_cls, type):
            fail("parse", "static_check", "the candidate defines no ModelNew class")
        notes: list[str] = []
        for spec_m in msg["models"]:
            init = decode_value(spec_m["init"], tensors)
            state = {name: tensors[i] for name, i in spec_m["state"]}
            torch.manual_seed(int(msg["seed"]))
            try:
                model = model_cls(*init)
                if isinstance(model, torch.nn.Module):
                    model = model.to(self.device)
            except BaseException as exc:  # noqa: B036
                self.guard.check_tripwires("building ModelNew")
                kind = classify_exception(exc) if isinstance(exc, Exception) else "runtime_error"
                fail("compile", kind, f"ModelNew(*init_inputs) raised {format_exception(exc, self.path)}")
            if not isinstance(model, torch.nn.Module):
                fail(
                    "compile",
                    "runtime_error",
                    f"ModelNew(...) made a {type(model).__name__}, not an nn.Module",
                )
            if state:
                own = model.state_dict()
                missing = [n for n in state if n not in own]
                wrong = [f"{n} {list(own[n].shape)} (reference {list(state[n].shape)})"
                         for n in state if n in own and own[n].shape != state[n].shape]  # fmt: skip
                if missing or wrong:
                    fail("compile", "runtime_error",
                          "ModelNew must hold the reference's parameters and buffers under the same names and "
                          "shapes; they are loaded into it (perturbed) after construction. "
                          + (f"Missing: {', '.join(missing[:8])}. " if missing else "")
                          + (f"Different shape: {', '.join(wrong[:8])}." if wrong else ""))  # fmt: skip
                try:
                    model.load_state_dict(state, strict=False)
                except Exception as exc:
                    fail("compile", "runtime_error", f"loading the reference's state_dict into ModelNew failed: "
                          f"{format_exception(exc, self.path)}")  # fmt: skip
            self.models[str(spec_m["key"])] = model
            # What a call that asks for a reset starts from (forward may update running statistics).
            self.initial_state[str(spec_m["key"])] = {
                k: v.detach().clone() for k, v in model.state_dict().items()
            }
            self.built_modes[str(spec_m["key"])] = {name: m.training for name, m in model.named_modules()}
        self.guard.check_threads("building ModelNew")
        for s in shared:
            s.close()
        return {"op": "loaded", "notes": notes, "memory_limit_bytes": limit}, []

    def attach(self, msg: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        """Open the judge's device buffers for one shape (hardware.isolation.cuda_ipc)."""
        from kernelwright.hardware.isolation.cuda_ipc import open_buffer

        key = str(msg["model"])
        descs = list(msg["inputs"]) + list(msg["outputs"])
        if len(descs) != len(fds):
            close_fds(fds)
            raise ProtocolError("buffer descriptions and descriptors do not match")
        opened = [open_buffer(d, fd, parse_description(d)[1]) for d, fd in zip(descs, fds, strict=True)]
        n = len(msg["inputs"])
        self.exchange[key] = {"inputs": opened[:n], "outputs": opened[n:]}
        return {"op": "attached"}, []

    # ------------------------------------------------------------------ call
    def _device_args(self, key: str, msg: dict[str, Any], shared: list[SharedTensor]) -> list[Any]:
        """Forward's arguments: on CPU the shared tensors themselves, on a GPU with lent buffers those
        buffers (either way the judge sees any write to them); else device copies, refilled in place
        when the request says so."""
        if msg.get("exchange"):
            lent = self.exchange[key]["inputs"]
            if msg.get("keep"):
                self.timing_args[key] = decode_value(msg["args"], lent)
            return decode_value(msg["args"], lent)
        host = [s.tensor for s in shared]
        if not self.cuda:
            return decode_value(msg["args"], host)
        if msg.get("refill") and key in self.staged:
            dev = self.staged[key]
            for d, h in zip(dev, host, strict=True):
                d.copy_(h)
        else:
            dev = [h.to(self.device) for h in host]
            if msg.get("keep"):
                self.staged[key] = dev
                self.timing_args[key] = decode_value(msg["args"], dev)
        return decode_value(msg["args"], dev)

    def call(self, msg: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        key = str(msg["model"])
        model = self.models.get(key)
        if model is None:
            close_fds(fds)
            raise ProtocolError(f"no model {key!r}")
        shared = self._shared(msg, fds, writable=True)
        args = self._device_args(key, msg, shared)
        if msg.get("reset"):
            model.load_state_dict(self.initial_state[key], strict=False)
        if msg.get("mode") == "eval":
            model.eval()
        else:
            for name, module in model.named_modules():
                module.training = self.built_modes[key].get(name, True)
        stage = str(msg.get("stage", "correctness"))
        record = bool(msg.get("evidence"))
        existing = self.guard.existing(args, model) if record else []
        secret = FingerprintKey()  # drawn for this call: forward cannot know it beforehand
        arg_prints = self.guard.arg_prints(args, secret) if self.cuda and not msg.get("exchange") else None
        self.guard.poison([int(n) for n in msg.get("poison_bytes", [])])
        if "rng_seed" in msg:  # as the reference's forward on these inputs was (Sample.forward_seed)
            self.torch.manual_seed(int(msg["rng_seed"]))
        out = self.guard.forward(model, args, stage, record, existing)
        if arg_prints is not None and self.guard.arg_prints(args, secret) != arg_prints:
            fail(
                "correctness",
                "forbidden",
                "forward wrote into its input tensors; inputs must be left as they were",
            )
        structure, tensors = self._encode_output(out)
        report: dict[str, Any] = {"op": "called", "structure": structure,
                                  "launches": sum(self.recorder.launches.values()) if record else None}  # fmt: skip
        if record:
            from kernelwright.hardware.judge.evidence import storage_key

            report["evidence"] = {
                "events": self.recorder.events,
                "truncated": self.recorder.truncated,
                "unseen": self.recorder.unseen[:16],
                "before": sorted({k for t in existing if (k := storage_key(t)) is not None}),
                "outputs": [k for t in tensors if (k := storage_key(t)) is not None],
                "launch_names": dict(self.recorder.launches),
            }
        out_fds = []
        state_fds, state_descs = [], []
        names = msg.get("buffers") or []
        if names:
            own = dict(model.named_buffers())
            for name in names:
                if name in own and type(own[name]) is self.torch.Tensor:
                    state_descs.append({"name": name, **describe_tensor(own[name])})
                    state_fds.append(tensor_to_memfd(own[name].detach(), "kw-buffer", seal=True))
        report["state"] = state_descs
        lent = self.exchange.get(key, {}).get("outputs") if msg.get("exchange") else None
        if (
            lent is not None
            and len(lent) == len(tensors)
            and all(
                t.shape == b.shape and t.dtype == b.dtype and t.device.type == "cuda"
                for t, b in zip(tensors, lent, strict=True)
            )
        ):
            for t, b in zip(tensors, lent, strict=True):
                b.copy_(t)
            t = None  # the loop variable would keep the last output alive through the profiled forward below
            self.captured.sync()
            report["exchanged"] = True
        else:
            try:
                for t in tensors:
                    out_fds.append(tensor_to_memfd(t, "kw-output", seal=True))
            except BaseException:
                close_fds(out_fds + state_fds)
                raise
        if self.cuda:  # on CPU forward may keep references to its inputs; the mapping stays with them
            for s in shared:
                s.close()
        del out, tensors, existing
        # After this call's output is gone: one output's memory at a time.
        if record and msg.get("profile") and self.cuda:
            report["evidence"]["kernels"] = self.guard.profile_kernels(model, args)
        return report, out_fds + state_fds

    def _encode_output(self, out: Any) -> tuple[Any, list[Any]]:
        """The output's structure as JSON, and its tensors; exact torch.Tensor only."""
        tensors: list[Any] = []
        return encode_output(self.torch, out, tensors, 0), tensors


def encode_output(torch: Any, v: Any, tensors: list[Any], depth: int) -> Any:
    """One level of forward's output as JSON, its tensors appended to `tensors`; exact torch.Tensor only.

    A plain recursive function, not a closure over `tensors`: a closure that calls itself is a reference
    cycle, and the cycle kept every output (gigabytes at published sizes) alive until the garbage collector
    happened to run, so two or three outputs' worth of device memory were held where one is needed."""
    if depth > 8:
        fail("correctness", "shape_mismatch", "forward's output is nested too deeply")
    if type(v) is torch.Tensor:
        tensors.append(v.detach())
        return {"T": len(tensors) - 1, **describe_tensor(v), "device": v.device.type}
    if isinstance(v, torch.Tensor):
        fail("correctness", "forbidden", f"forward returned a {type(v).__module__}.{type(v).__qualname__}, "
              "a tensor subclass; outputs must be plain torch.Tensor")  # fmt: skip
    if isinstance(v, bool | int | float | str | type(None)):
        return {"V": v}
    if type(v) is tuple:
        return {"U": [encode_output(torch, x, tensors, depth + 1) for x in v]}
    if type(v) is list:
        return {"L": [encode_output(torch, x, tensors, depth + 1) for x in v]}
    if isinstance(v, dict) and all(type(k) is str for k in dict.keys(v)):
        # in sorted key order, as the judge flattens one. A dict subclass (transformers' ModelOutput is an
        # OrderedDict) is read through dict's own methods: what it holds, no code of its class runs here
        # (a lazy __getitem__ would compute outside the recorded forward)
        return {"D": [[k, encode_output(torch, dict.__getitem__(v, k), tensors, depth + 1)]
                      for k in sorted(dict.keys(v))]}  # fmt: skip
    fail("correctness", "shape_mismatch", f"forward returned a {type(v).__name__}, which is neither a "
          "tensor nor a tuple/list or a dict (string keys) of them")  # fmt: skip


def serve_candidate(sock_fd: int, device: str, private_dir: str, confinement: Confinement) -> None:
    """Entry point in the forked candidate process, after confinement."""
    import socket

    log_fd = os.open(os.path.join(private_dir, "output.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    faulthandler.enable(file=sys.stderr, all_threads=False)
    chan = Channel(socket.socket(fileno=sock_fd))
    code = 0
    try:
        Runner(chan, device, private_dir, confinement).serve()
    except (ChannelClosed, ConnectionError):
        pass
    except BaseException:  # noqa: B036 - the harness's own failure: its traceback goes to the log
        import traceback

        traceback.print_exc()
        code = 72
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # Exit without running anything the candidate may have registered (atexit, finalizers).
        os._exit(code)
