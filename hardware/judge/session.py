"""The judge's session with one candidate process: its calls into the process, and what it reads back.

Sends the candidate's source, constructor arguments and the reference's perturbed state (`load`) and
each trial's inputs (`call`, through host shared memory or device buffers lent over CUDA IPC:
`attach`); reads back only sealed memfds or the lent buffers, checked against the declared structure
(`_rebuild`, `_from_exchange`, `_tensor_descs`); checks that inputs were left as they were and that
the buffers a forward updates match the reference's (`_check_buffers`, float64-anchored as outputs
are). Every failure ends the job through `JobState.fail` (hardware.judge.job).

Nothing a reply describes is mapped before two checks: that the reply is the runner's own (a ping
right after it must be answered by a pong: a frame candidate code wrote during forward would have
arrived first, and the runner's real answer would then answer the ping), and that every tensor it
declares has the shape, dtype and device the reference's has (a different one is reported from its
description alone), so a forged or oversized answer costs the judge no more memory than a right one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from kernelwright.hardware.isolation.candidate_process import CandidateProcess
from kernelwright.hardware.isolation.channel import (
    ProtocolError,
    SharedTensor,
    check_sealed,
    close_fds,
    decode_value,
    encode_value,
    parse_description,
    tensor_nbytes,
)
from kernelwright.hardware.judge.device import Device
from kernelwright.hardware.judge.job import JobState
from kernelwright.hardware.judge.records import Exchange, Reference, Sample, Shape
from kernelwright.hardware.judge.tensors import bitwise_equal, tensors_of


@dataclass
class IpcState:
    """Whether the judge lends device buffers to candidate processes through CUDA IPC (kept across jobs:
    it stops trying once IPC fails before it ever worked)."""

    usable: bool
    worked: bool = False


class CandidateSession:
    """One job's requests to its candidate process and the checks on what comes back (see the module
    docstring)."""

    def __init__(self, job: JobState, proc: CandidateProcess, device: Device, ipc: IpcState) -> None:
        self.job = job
        self.proc = proc
        self.device = device
        self.ipc = ipc

    def request(self, msg: dict[str, Any], stage: str, expected: str) -> dict[str, Any]:
        """A request without tensors, within the stage's time left; the reply must be `expected`."""
        reply, fds = self.proc.request(msg, [], self.job.remaining(), stage)
        close_fds(fds)
        self.job.check_reply(reply, expected)
        return reply

    def load(self, shapes: list[Shape], refs: dict[str, Reference], memory_bytes: int | None) -> None:
        """Build ModelNew in the candidate process for every shape, the reference's state loaded into it."""
        job, proc, cfg = self.job, self.proc, self.job.cfg
        tensors: list[Any] = []
        models = []
        for s in shapes:
            ref = refs[s.label]
            try:
                init = encode_value(list(ref.init_inputs), tensors)
            except TypeError as exc:
                job.fail(
                    "compile", "harness_error", f"the task's constructor arguments cannot be sent: {exc}"
                )
            state = []
            for name, t in ref.model.state_dict().items():
                tensors.append(t)
                state.append([name, len(tensors) - 1])
            models.append({"key": s.label, "init": init, "state": state})
        shared = [SharedTensor.create(t, "kw-state") for t in tensors]
        try:
            reply, fds = proc.request({"op": "load", "source": job.request.candidate_source, "seed": cfg.seed,
                                       "precision": cfg.precision, "models": models, "memory_bytes": memory_bytes},
                                      shared, job.remaining(), "compile")  # fmt: skip
        finally:
            for lent in shared:
                lent.close()
        close_fds(fds)
        job.check_reply(reply, "loaded")
        if isinstance(proc.info.get("confinement"), dict):
            proc.info["confinement"]["memory_limit_bytes"] = reply.get("memory_limit_bytes")

    def call(self, ref: Reference, sample: Sample, stage: str, *, profile: bool = False, keep: bool = False,
             refill: bool = False, mode: str = "train", reset: bool = False) -> tuple[Any, dict[str, Any]]:  # fmt: skip
        """One forward in the candidate process on `sample`'s inputs, recorded as evidence (every call is:
        the reply's "evidence"; `profile`: on a GPU also the profiler's view of one more forward);
        (output, reply). Checks that the reply is the runner's own, that the inputs are unchanged (where
        the judge can see them) and that the output is sealed and fits the reference's before it is
        read."""
        job, proc = self.job, self.proc
        tensors: list[Any] = []
        args = encode_value(list(sample.inputs), tensors)
        exchange = ref.exchange if ref.shape.label in proc.attached else None
        shared = [] if exchange is not None else [SharedTensor.create(t, "kw-input") for t in tensors]
        if exchange is not None:  # the trial's pristine inputs into the lent buffers, on the device
            for buf, t in zip(exchange.inputs, tensors, strict=True):
                buf.tensor.copy_(t)
            self.device.sync()
        poison = [t.numel() * t.element_size() for t in tensors_of(sample.out)]
        try:
            reply, fds = proc.request(
                {"op": "call", "model": ref.shape.label, "args": args, "evidence": True, "profile": profile,
                 "stage": stage, "poison_bytes": poison, "keep": keep, "refill": refill,
                 "exchange": exchange is not None, "mode": mode, "reset": reset, "rng_seed": sample.forward_seed,
                 "buffers": sorted(sample.buffers) if reset else []},
                shared, job.remaining(), stage,
            )  # fmt: skip
            try:
                job.check_reply(reply, "called")
                self.in_step(stage)
                seen = (
                    [b.tensor for b in exchange.inputs]
                    if exchange is not None
                    else [x.tensor for x in shared]
                )
                if seen:
                    expected = sample.inputs_after if sample.inputs_after is not None else sample.inputs
                    for i, (got, want) in enumerate(zip(seen, tensors_of(expected), strict=True)):
                        if not bitwise_equal(got, want):
                            job.fail(stage, "forbidden",
                                       f"forward wrote into input {i}; inputs must be left as they were"
                                       + (" (or changed exactly as the reference changes them)"
                                          if sample.inputs_after is not None else ""))  # fmt: skip
                state_descs = reply.get("state") or []
                if not isinstance(state_descs, list) or len(state_descs) > len(fds):
                    job.fail(stage, "forbidden", "the candidate process sent a malformed buffer list")
                n_out = len(fds) - len(state_descs)
                if exchange is not None and reply.get("exchanged") is True and n_out == 0:
                    out = self._from_exchange(reply.get("structure"), exchange, copy=not ref.lean)
                else:
                    out = self._rebuild(reply.get("structure"), fds[:n_out], expected=sample.out)
                if reset:
                    self._check_buffers(state_descs, fds[n_out:], sample, mode, stage)
            finally:
                close_fds(fds)
        finally:
            for x in shared:
                x.close()
        return out, reply

    def in_step(self, stage: str) -> None:
        """The reply just read must be the runner's own answer: a ping now must get a pong. A frame written
        by candidate code during forward arrives before the runner's answer, which then answers the ping
        (and a frame written after it is waiting when the ping is sent: CandidateProcess.request)."""
        job = self.job
        reply, fds = self.proc.request({"op": "ping"}, [], max(job.remaining(), 5.0), stage)
        close_fds(fds)
        if reply.get("op") != "pong":
            job.fail(stage, "forbidden",
                       f"the candidate process's answers are out of step with the judge's requests (got "
                       f"{reply.get('op')!r} for a ping): a forged reply from candidate code was read as the answer")  # fmt: skip

    def _check_buffers(self, descs: list[Any], fds: list[int], sample: Sample, mode: str,
                       stage: str) -> None:  # fmt: skip
        """The candidate's buffers after forward (running stats) against the reference's, every one: in strict
        precision's row, float64-anchored like outputs where the float64 run's buffers exist (sample.buffers64);
        against the float32 reference alone where they do not; integer buffers exactly."""
        from kernelwright.hardware.judge.compare import compare_tensor

        job = self.job
        got: dict[str, Any] = {}
        try:
            for desc, fd in zip(descs, fds, strict=True):
                shape, dtype = parse_description(desc)
                name = str(desc.get("name"))
                want = sample.buffers.get(name)
                if want is None or name in got:
                    raise ProtocolError(f"a buffer {name[:80]!r} the judge did not ask for, or sent twice")
                if shape != list(want.shape):  # reported from the description: nothing mapped
                    job.fail("correctness", "shape_mismatch",
                               f"buffer {name} has shape {shape} after forward, expected {list(want.shape)}")  # fmt: skip
                check_sealed(fd, tensor_nbytes(shape, dtype))
                st = SharedTensor(os.dup(fd), shape, dtype, writable=False)
                got[name] = st.tensor.clone()
                st.close()
        except ProtocolError as exc:
            job.fail(stage, "forbidden", f"the candidate process sent malformed buffers: {exc}")
        for name, want in sample.buffers.items():
            have = got.get(name)
            if have is None:
                job.fail("correctness", "shape_mismatch", f"ModelNew has no buffer {name} after forward")
            have = have.to(want.device)
            if have.shape != want.shape:
                job.fail("correctness", "shape_mismatch",
                           f"buffer {name} has shape {list(have.shape)} after forward, expected {list(want.shape)}")  # fmt: skip
            # Anchored on the float64 run's buffer where there is one, as outputs are (hardware.judge.compare):
            # a running statistic carries the rounding of every op before it, the reference's included.
            want64 = sample.buffers64.get(name) if self.job.cfg.reference_fp64 else None
            cmp = compare_tensor(have.to(want.dtype), want, "strict", label=f"buffer {name}", ref64=want64)
            if not cmp.ok:
                job.fail("correctness", "mismatch",
                           f"after a {mode}-mode forward, {cmp.report}\n(the reference's forward updates its "
                           "buffers in train mode, e.g. BatchNorm's running statistics; ModelNew must do the same, "
                           "and must use them in eval mode)")  # fmt: skip

    def _from_exchange(self, structure: Any, exchange: Exchange, *, copy: bool = True) -> Any:
        """The candidate's output, copied at once out of the lent output buffers into the judge's memory.
        Without `copy` (a large task): the lent buffers themselves, which the comparison reads a chunk at a
        time into its own float64 copies (hardware.judge.compare._Pieces), so what is judged is still what the
        buffer held when it was read, at no extra output-sized copy."""
        job = self.job
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
            job.fail("correctness", "forbidden", f"the candidate process sent a malformed output: {exc}")

    def attach(self, ref: Reference, sample: Sample) -> None:
        """Lend this shape's device buffers to the candidate process (GPU with CUDA IPC); on failure the
        calls go through host shared memory, and the judge stops trying IPC if it never worked here."""
        job, proc = self.job, self.proc
        if not self.device.cuda or not self.ipc.usable:
            return
        try:
            if ref.exchange is None:
                from kernelwright.hardware.isolation.cuda_ipc import ExportedBuffer

                ref.exchange = Exchange(
                    [ExportedBuffer(list(t.shape), t.dtype) for t in tensors_of(sample.inputs)],
                    [ExportedBuffer(list(t.shape), t.dtype) for t in tensors_of(sample.out)],
                )
            lent = [b.fd for b in ref.exchange.inputs + ref.exchange.outputs]
            reply, fds = proc.request({"op": "attach", "model": ref.shape.label, **ref.exchange.descriptions()}, [],
                                      job.remaining(), "compile", fds=lent)  # fmt: skip
            close_fds(fds)
        except (RuntimeError, OSError) as exc:
            self.ipc.usable = self.ipc.worked
            job.notes.append(f"CUDA IPC unavailable ({exc}); tensors staged through host memory")
            return
        if reply.get("op") == "attached":
            proc.attached.add(ref.shape.label)
            self.ipc.worked = True
        else:
            self.ipc.usable = self.ipc.worked
            job.notes.append(f"CUDA IPC refused in the candidate process ({str(reply.get('text'))[-600:]}); "
                                      "tensors staged through host memory")  # fmt: skip

    def _rebuild(self, structure: Any, fds: list[int], *, expected: Any = None) -> Any:
        """The candidate's output from its JSON structure and sealed memfds, as the judge's own tensors.

        With `expected` (the reference's output): unless every declared tensor has the shape, dtype and
        device of the reference's, in order, nothing is mapped; the output is rebuilt from its description
        over one element per tensor, for the comparison to report how it differs."""
        import torch

        job, judge_device = self.job, self.device.kind
        tensors: list[Any] = []
        try:
            descs = _tensor_descs(structure)
            if len(descs) != len(fds):
                raise ProtocolError(f"{len(fds)} output descriptors for {len(descs)} tensors")
            declared = []
            for desc in descs:
                shape, dtype = parse_description(desc)
                device = judge_device if desc.get("device") == judge_device else str(desc.get("device"))
                if device not in ("cpu", "cuda") or (device == "cuda" and judge_device != "cuda"):
                    raise ProtocolError(f"output on unknown device {device[:40]!r}")
                declared.append((shape, dtype, device))
            if expected is not None:
                want = [(list(t.shape), t.dtype, t.device.type) for t in tensors_of(expected)]
                if declared != want:  # compare_outputs reports the difference before it reads a value
                    stand_ins = [torch.zeros((), dtype=dtype, device=device).expand(shape)
                                 for shape, dtype, device in declared]  # fmt: skip
                    return decode_value(structure, stand_ins)
            for (shape, dtype, device), fd in zip(declared, fds, strict=True):
                check_sealed(fd, tensor_nbytes(shape, dtype))
                st = SharedTensor(os.dup(fd), shape, dtype, writable=False)
                t = st.tensor.to(device, copy=True) if device != "cpu" else st.tensor.clone()
                st.close()
                tensors.append(t)
            return decode_value(structure, tensors)
        except ProtocolError as exc:
            job.fail("correctness", "forbidden", f"the candidate process sent a malformed output: {exc}")


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
        if "D" in v:
            if not isinstance(v["D"], list) or not all(isinstance(i, list) and len(i) == 2 for i in v["D"]):
                raise ProtocolError("malformed output structure")
            for _, x in v["D"]:
                walk(x, d + 1)

    walk(structure, depth)
    if [d.get("T") for d in found] != list(range(len(found))):
        raise ProtocolError("output tensors are not numbered in order")
    return found
