"""The judge's reference cache: the task loaded once per judge, its reference models built (perturbed) per
shape, the pristine inputs and expected outputs per trial (float64 too, within a time share), the modes
the task is verified in, the ops the reference dispatches, and whether judging the task fits the GPU.

It knows nothing of candidates: the judge's other parts (hardware.judge.session, judge_verification,
judge_timing) read what it holds. A large task is judged lean (see ReferenceCache.fits): one trial's
tensors at a time.
"""

from __future__ import annotations

import copy
import hashlib
import secrets
import time
from collections import OrderedDict
from typing import Any

from kernelwright.hardware.failures import classify_exception
from kernelwright.hardware.judge.device import Device
from kernelwright.hardware.judge.fingerprint import FingerprintKey, fingerprint
from kernelwright.hardware.judge.inputs import LEAN_BYTES, lean_float64_fits, needed_bytes, perturb_
from kernelwright.hardware.judge.job import TimeBudget, Unverifiable
from kernelwright.hardware.judge.records import Reference, Sample, Shape, TaskState
from kernelwright.hardware.judge.tensors import (
    bitwise_equal,
    clone,
    detach,
    map_tensors,
    out_of_memory,
    tensors_of,
    upcast,
)

# The float64 run's cost before it was measured: the float32 run's times this (see _FP64_BUDGET_SHARE in
# hardware.judge.server).
_FP64_COST_FACTOR = 32.0
_TASK_CACHE_SIZE = 3


def forward_seed() -> int:
    """The RNG seed both forwards on one trial's inputs start from (`Sample.forward_seed`): drawn from the OS
    for each sample, so a forward that reads torch's seed learns nothing of the inputs' seeds."""
    return secrets.randbits(63)


class ReferenceCache:
    """The references and their samples, cached per task across jobs (see the module docstring)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.torch = device.torch
        self.tasks: OrderedDict[str, TaskState] = OrderedDict()
        """The last few tasks judged, by their source's digest, most recent last."""

    def task(self, source: str, name: str) -> TaskState:
        """The task of this source, loaded once (the least recently used of those held is dropped)."""
        from kernelwright.tasks import exec_task_module

        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        state = self.tasks.get(digest)
        if state is None:
            state = TaskState(exec_task_module(source, name), name, digest)
            state.module.__dict__["__kw_source__"] = source
            self.tasks[digest] = state
            while len(self.tasks) > _TASK_CACHE_SIZE:
                self.drop(self.tasks.popitem(last=False)[1])
        self.tasks.move_to_end(digest)
        return state

    def fits(self, task: TaskState, shape: Shape, extra: dict[str, Any]) -> None:
        """On a GPU, before anything of a task is built: will judging it fit the free device memory?

        A large task (own footprint over LEAN_BYTES) is judged lean: one trial's tensors at a time, no
        float64 reference unless lean_float64_fits, the candidate's output compared where it lies in the lent buffer, and the other
        tasks' state dropped first. It then needs needed_bytes (hardware.judge.inputs): about 2x the inputs, 3x the
        outputs and 2x the parameters, plus ~1 GiB of contexts and L2-flush buffers. If that does not fit: one harness_error that says what it
        needs and what is free, instead of a string of out-of-memory failures. The figures go into
        `extra["memory"]` (a result's extra), the first time the task is checked.
        """
        from kernelwright.tasks.resize import footprint

        if task.unfit is not None:
            raise Unverifiable(task.unfit)
        if not self.device.cuda or task.footprint_checked:
            return
        fp = footprint(shape.module, small=shape.small)
        task.footprint_checked = True
        if fp is None:
            return
        task.lean = fp.total > LEAN_BYTES
        if task.lean:
            for digest in [d for d in self.tasks if d != task.digest]:
                self.drop(self.tasks.pop(digest))
        need = needed_bytes(fp)
        free, _ = self.torch.cuda.mem_get_info()
        gib = 1 << 30
        task.lean_float64 = task.lean and lean_float64_fits(fp, free)
        extra["memory"] = {"footprint_bytes": fp.total, "needed_bytes": need, "free_bytes": free,
                               "lean": task.lean, "lean_float64": task.lean_float64}  # fmt: skip
        if need > free:
            task.unfit = (
                f"judging it needs about {need / gib:.1f} GiB of device memory (inputs {fp.inputs / gib:.2f} GiB, "
                f"outputs {fp.outputs / gib:.2f} GiB, parameters {fp.parameters / gib:.2f} GiB, about 2x, 3x and 2x "
                f"of them) and {free / gib:.1f} GiB are free on this GPU: sizes at about "
                f"{max(0.0, (free - gib) / max(need - gib, 1)):.0%} of the task's fit"
            )
            raise Unverifiable(task.unfit)

    def release_samples(self, ref: Reference) -> None:
        """A large task's samples (inputs and expected outputs) dropped, and the memory given back to the GPU
        at once: the next tensors may be of other sizes, which the allocator's cached blocks would not fit."""
        ref.samples.clear()
        self.torch.cuda.empty_cache()

    def drop(self, task: TaskState) -> None:
        """Free a task's device state (references, samples, lent buffers)."""
        for ref in task.refs.values():
            if ref.exchange is not None:
                for buf in ref.exchange.inputs + ref.exchange.outputs:
                    buf.free()
        task.refs.clear()
        if self.device.cuda:
            self.torch.cuda.empty_cache()

    def reference(self, task: TaskState, shape: Shape, seed: int, perturb_seed: int) -> Reference:
        """The reference for one shape, built with torch seeded by `seed` and its parameters and buffers
        perturbed with `perturb_seed` (each job's own: the model is built again when it changes)."""
        from kernelwright.tasks import task_init_inputs, task_model

        ref = task.refs.get((shape.label, seed))
        if ref is not None and ref.perturbed_with != perturb_seed:
            ref.model, ref.state0 = None, {}  # freed before the next one is built
            if self.device.cuda:
                self.torch.cuda.empty_cache()
            ref.model = task_model(shape.module, small=shape.small, seed=seed, device=self.device.kind)
            perturb_(ref.model, perturb_seed)
            ref.perturbed_with = perturb_seed
            ref.state0 = {k: v.detach().clone() for k, v in ref.model.state_dict().items()}
            ref.built_modes = {name: m.training for name, m in ref.model.named_modules()}
        if ref is None:
            model = task_model(shape.module, small=shape.small, seed=seed, device=self.device.kind)
            perturb_(model, perturb_seed)
            ref = Reference(shape, task_init_inputs(shape.module, small=shape.small), model)
            ref.perturbed_with = perturb_seed
            if task.lean:  # a large task's small second shape still gets copies and a float64 reference
                from kernelwright.tasks.resize import footprint

                own = footprint(shape.module, small=shape.small)
                ref.lean = own is None or own.total > LEAN_BYTES
                ref.lean_float64 = ref.lean and task.lean_float64
            ref.state0 = {k: v.detach().clone() for k, v in model.state_dict().items()}
            ref.built_modes = {name: m.training for name, m in model.named_modules()}
            task.refs[(shape.label, seed)] = ref
        return ref

    def inputs(self, ref: Reference, seed: int) -> list[Any]:
        from kernelwright.tasks import task_inputs

        # A large task's inputs are drawn on the GPU itself (seconds on CPU at gigabytes).
        inputs = task_inputs(ref.shape.module, small=ref.shape.small, seed=seed, device=self.device.kind,
                             on_device=ref.lean)  # fmt: skip
        return ref.shape.transform(inputs) if ref.shape.transform is not None else inputs

    def sample(self, ref: Reference, seed: int, precision: str, *, budget: TimeBudget, fp64: bool = True,
                mode: str = "train") -> Sample:  # fmt: skip
        """Pristine inputs and the reference outputs for one trial in one mode, computed once per job.
        The forward starts from the reference's starting state, which is restored after it. `budget`: the
        job's time for float64 runs of the reference."""
        from kernelwright.hardware.judge.compare import needs_float64_reference

        key = (seed, precision, mode)
        sample = ref.samples.get(key)
        t32 = 0.0
        if sample is None:
            if ref.lean:  # one trial's tensors at a time
                self.release_samples(ref)
            inputs = self.inputs(ref, seed)
            # A large task runs the reference on the inputs themselves and draws them again if it wrote them.
            args = inputs if ref.lean else clone(inputs)
            secret = FingerprintKey()
            before = [fingerprint(t, secret) for t in tensors_of(args)] if ref.lean else []
            ref.restore(mode)
            t0 = time.perf_counter()
            rng_seed = forward_seed()
            self.torch.manual_seed(rng_seed)
            with self.torch.no_grad():
                out = ref.model(*args)
            self.device.sync()
            t32 = time.perf_counter() - t0
            buffers = {k: v.detach().clone() for k, v in ref.model.named_buffers()}
            ref.restore("train")
            if ref.lean:
                changed = [fingerprint(t, secret) for t in tensors_of(args)] != before
                if changed:
                    inputs = self.inputs(ref, seed)
            else:
                changed = any(
                    not bitwise_equal(a, b) for a, b in zip(tensors_of(args), tensors_of(inputs), strict=True)
                )
            sample = ref.samples[key] = Sample(inputs, detach(out), inputs_after=args if changed else None,
                                                buffers=buffers, forward_seed=rng_seed)  # fmt: skip
        if fp64 and sample.fp64_status is None:
            if ref.lean and not ref.lean_float64:
                sample.fp64_status = (
                    "unavailable: the task is too large for a float64 run in the free device memory"
                )
            elif not needs_float64_reference(sample.out, precision):  # type: ignore[arg-type]
                sample.fp64_status = (
                    f"not used: TF32 is on for the reference in {precision} precision"
                    if precision != "strict"
                    else "not used: no float32 output"
                )
            else:
                self._reference64(ref, sample, t32, budget, mode)
        return sample

    def modes(self, task: TaskState, ref: Reference, seed: int) -> None:
        """Which modes to verify in, from four runs of the reference on the same inputs: train and eval,
        each with two RNG seeds. Output that changes with the RNG seed in eval mode (random numbers drawn in
        forward) is verified with both forwards seeded alike (`forward_seed`), if a fifth run with the first
        seed gives the first run's output again, else it cannot be verified by value (harness_error: the
        search stops); in train mode only (dropout), it is verified in eval mode only; output that differs
        between train and eval, or buffers that forward updates, are verified in both (buffers compared
        too)."""
        from kernelwright.hardware.judge.compare import compare_outputs

        if task.modes is not None:
            return
        inputs = self.inputs(ref, seed)

        def run(mode: str, rng: int) -> tuple[Any, bool]:
            """One forward in `mode` with torch seeded `rng`: its output, and whether it changed a buffer (the
            model is left as the forward left it)."""
            ref.restore(mode)
            self.torch.manual_seed(rng)
            with self.torch.no_grad():
                out = detach(ref.model(*clone(inputs)))
            self.device.sync()
            updated = any(
                not bitwise_equal(v, ref.state0[k]) for k, v in ref.model.named_buffers() if k in ref.state0
            )
            return out, updated

        runs = {(mode, rng): run(mode, rng) for mode in ("train", "eval") for rng in (1, 2)}
        ref.restore("train")

        def same(a: Any, b: Any) -> bool:  # the loosest row: nondeterministic kernels (atomics) still agree
            return compare_outputs(a, b, "reduced").ok

        task.stateful = runs[("train", 1)][1] or runs[("eval", 1)][1]
        random_in_eval = not same(runs[("eval", 1)][0], runs[("eval", 2)][0])
        if random_in_eval:
            again = run("eval", 1)[0]
            ref.restore("train")
            if not same(runs[("eval", 1)][0], again):
                raise Unverifiable(
                    "the reference's output changes from run to run on the same inputs and the same random "
                    "seed, in eval mode too: it cannot be verified by value"
                )
        if not same(runs[("train", 1)][0], runs[("train", 2)][0]):
            task.modes = ["eval"]
            task.modes_note = (
                "the reference draws random numbers in forward: verified in eval mode, the candidate's forward "
                "seeded as the reference's was (it must draw the same numbers: keep those calls in torch)"
                if random_in_eval
                else "the reference is random in train mode (dropout?): verified in eval mode only"
            )
        elif task.stateful or not same(runs[("train", 1)][0], runs[("eval", 1)][0]):
            task.modes = ["train", "eval"]
            task.modes_note = ("the reference behaves differently in train() and eval() or updates its buffers: "
                               "trials alternate between the two modes and buffers are compared after forward")  # fmt: skip
        else:
            task.modes = ["train"]

    def _reference64(
        self, ref: Reference, sample: Sample, t32: float, budget: TimeBudget, mode: str = "train"
    ) -> None:
        """Run a float64 copy of the reference model on upcast inputs; on failure say why, never raise."""
        torch = self.torch
        if ref.fp64_failure is not None:
            sample.fp64_status = ref.fp64_failure
            return
        estimate = ref.fp64_s if ref.fp64_s is not None else t32 * _FP64_COST_FACTOR
        if estimate > budget.seconds:
            sample.fp64_status = (
                f"unavailable: a float64 run would take ~{estimate:.3g} s, over its {budget.seconds:.3g} s "
                "share of the reference time limit"
            )
            return
        model64: Any = None
        t0 = time.perf_counter()
        try:
            ref.restore(mode)
            model64 = copy.deepcopy(ref.model).double()
            ref.restore("train")
            torch.manual_seed(sample.forward_seed)
            with torch.no_grad():
                out64 = model64(*map_tensors(sample.inputs, upcast))
            self.device.sync()
            sample.out64, sample.fp64_status = detach(out64), "used"
            # Its buffers after forward anchor the candidate's as out64 anchors its outputs (running
            # statistics carry the rounding of every op before them, the float32 reference's too).
            sample.buffers64 = {k: v.detach() for k, v in model64.named_buffers()}
        except Exception as exc:
            if out_of_memory(exc):
                sample.fp64_status = "unavailable: out of memory"
                return
            if classify_exception(exc) == "crash":
                raise
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            sample.fp64_status = f"unavailable: {type(exc).__name__}: {first}"
        finally:
            del model64
            if self.device.cuda and sample.fp64_status != "used":
                torch.cuda.empty_cache()
            spent = time.perf_counter() - t0
            ref.fp64_s = spent
            if sample.fp64_status != "used":
                ref.fp64_failure = sample.fp64_status
            budget.spend(spent)

    def reference_ops(self, task: TaskState, ref: Reference, sample: Sample) -> dict[str, int]:
        """The compute ops the reference dispatches, with how many times (recorded once per task, on its
        smallest shape)."""
        from torch.utils._python_dispatch import _pop_mode, _push_mode

        from kernelwright.hardware.judge.evidence import Recorder, RecordingMode, compute_ops

        if task.reference_ops is None:
            rec = Recorder()
            rec.start()
            _push_mode(RecordingMode(rec))
            try:
                with self.torch.no_grad():
                    ref.model(*clone(sample.inputs))
            finally:
                _pop_mode()
                rec.stop()
                ref.restore("train")
            task.reference_ops = dict(compute_ops(rec.events))
        return task.reference_ops

    def forget_samples(self) -> None:
        """Drop every held trial's inputs and outputs (a job's inputs are never used again)."""
        for state in self.tasks.values():
            for ref in state.refs.values():
                ref.samples.clear()
