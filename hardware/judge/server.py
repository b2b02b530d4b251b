"""The judge: the process that owns the references and issues every verdict, and never imports a candidate.

Started by `hardware.judge.pool.WorkerPool` through hardware.judge.process, one per GPU (N on CPU), and kept for
many jobs so references stay warm. For each job it starts a fresh candidate process through its fork server
(hardware.isolation.forkserver), confined, and drives it over a JSON channel (hardware.isolation.channel, hardware.candidate.runner): the
candidate process gets the source, constructor arguments, the reference's perturbed parameters and each
trial's inputs; the judge keeps the pristine inputs, the expected outputs, the tolerances and the timing
checks, and reads back only sealed shared-memory tensors and JSON. A candidate process that dies, hangs,
breaks the protocol or is done is killed with every process it started; the judge carries on with the next
job.

Protocol with the pool (multiprocessing.connection over a socketpair; both sides are trusted code):
- judge -> pool: ("ready", info) once; per job ("stage", job_id, stage) at every stage change
  (reference, compile, correctness, timing, baseline: see hardware.config.WorkerStage),
  ("partial", job_id, result) once the candidate is verified and timed (so a slow torch.compile
  baseline keeps the verdict), and ("result", job_id, result, restart) at the end; `restart` asks the
  pool to replace the judge (a CUDA error or out-of-memory in the judge's own work).
- pool -> judge: ("eval", job) or ("stop",).
The judge enforces the candidate stages' time limits itself (it kills the candidate process); the pool
keeps an outer limit for the judge's own work (the reference, the baseline) and as a safety net.

Verification (hardware.judge.compare has the tolerance table):
- the reference `Model` is built from the task's init inputs with torch seeded, then its floating
  parameters and buffers are perturbed (with a seed of the job's own, drawn from the OS), so a kernel
  that ignores a parameter whose default value is neutral (a LayerNorm's weight and bias) fails, and
  none can derive the values in __init__; ModelNew is built with the same seed and the reference's
  perturbed state_dict is loaded into it (it must hold every reference key, same shapes);
- shapes: the task's full inputs and its small ones on a GPU, the small ones on CPU, and always a
  second shape: `get_small_inputs()` where defined, else the task at other sizes found by changing its
  module-level size constants (tasks.resize); a task too large for the CPU interpreter is verified
  there at such a size;
- every trial uses fresh inputs from a seed of its own, drawn from the OS for the job (never from the
  configured seed: a candidate cannot know or reproduce them; the result lists them after the verdict,
  hardware.judge.inputs.JobSeeds); the model instance is kept across trials, so a result cached from an
  earlier call fails a later one; inputs must be unchanged after forward (or changed exactly as the
  reference changes them);
- the output's structure must match the reference's exactly (a tensor is not a one-element list),
  every tensor a plain torch.Tensor, same shape, dtype and device, then values within tolerance, NaN
  and inf included; memory forward allocates reads as NaN unless written (the candidate side poisons
  it and fails a candidate that switches the poisoning off);
- runtime evidence (hardware.judge.evidence) from every forward whose output the judge reads: the output
  must come from Triton kernels' writes, not from torch ops with kernels beside them, and nothing may
  run out of sight (no thread started, no memory changed that no recorded op wrote);
- in strict precision, float32 outputs are also compared against a float64 run of the reference with
  an allowance for the reference's own rounding error (hardware.judge.compare).

Timing (GPU): the candidate process times its calls with CUDA events (L2 flushed before each), the
judge times the eager reference the same way, in alternating rounds (each side first in every other
round, each making as many calls as its own time fits in a round: hardware.judge.timing.calls_per_round);
the judge then times a synchronised loop of candidate calls with its own wall clock and fails a
candidate whose reported times are far below it; last, the timed inputs get new contents (a fresh seed of their own) and the
answer must follow. The torch.compile'd reference is timed once per task in the judge, in alternating
rounds with eager, cached on disk; a candidate is compared with it through eager (hardware.judge.timing).

The parts, one module each, composed here (the Judge serves the pool and runs a job; it holds no state
of one job): one job's request and state, passed to every part (hardware.judge.job); the device and
torch (hardware.judge.device); what is kept per task (hardware.judge.records); shapes, seeds and the
memory bound (hardware.judge.inputs); the reference cache, which knows nothing of candidates
(hardware.judge.reference); the session with one candidate process, over hardware.isolation.candidate_process
(hardware.judge.session); verification (hardware.judge.verification) and timing
(hardware.judge.timing), functions of the job, the reference cache and the session. A new check on
what a candidate returns goes in judge_verification (per trial) or judge_session (per reply).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from kernelwright.hardware.config import EvalConfig
from kernelwright.hardware.failures import classify_exception, harness_failure
from kernelwright.hardware.isolation.candidate_process import CandidateGone, CandidateProcess, ForkServer
from kernelwright.hardware.judge.device import Device
from kernelwright.hardware.judge.inputs import (
    LEAN_BYTES,
    draw_seeds,
    lean_float64_fits,
    perturb_,
    trial_count,
    verified_shapes,
)
from kernelwright.hardware.judge.job import JobRequest, JobState, Stop, TimeBudget, Unverifiable
from kernelwright.hardware.judge.records import Reference
from kernelwright.hardware.judge.reference import ReferenceCache
from kernelwright.hardware.judge.session import CandidateSession, IpcState
from kernelwright.hardware.judge.tensors import tensors_of
from kernelwright.hardware.judge.timing import paired_speedup_from_ratios, time_candidate
from kernelwright.hardware.judge.verification import verify
from kernelwright.hardware.result import EvalResult, Versions

__all__ = [
    "LEAN_BYTES",
    "PARAMETERS_NOTE",
    "CandidateProcess",
    "ForkServer",
    "Judge",
    "lean_float64_fits",
    "paired_speedup_from_ratios",
    "perturb_",
]

# The float64 reference runs within this share of the reference stage's time limit (all its runs in one
# job together). Before the first run its cost is estimated as the float32 run's time times
# _FP64_COST_FACTOR (pessimistic: cuDNN float64 convolutions and CPU kernels are several times slower);
# later runs use the measured time.
_FP64_BUDGET_SHARE = 0.25
_CANDIDATE_START_S = 60.0
_CPU_MEMORY_BASE = 1 << 30
_CPU_MEMORY_FACTOR = 8

PARAMETERS_NOTE = "parameters and buffers perturbed (seeded) and loaded into ModelNew"
"""The note every result carries: the reference's state was perturbed and handed to the candidate."""


def _raise_open_files_limit(want: int = 65536) -> None:
    """Lift this process's soft RLIMIT_NOFILE towards its hard one: a model's state crosses to the
    candidate process as one memfd per tensor (ResNet101 has ~500 per shape), and a 1024 default would
    run out before the candidate's own limit does."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class Judge:
    """Serves the pool and runs its jobs; holds what makes warm evaluation fast (the reference cache, the
    fork server)."""

    def __init__(self, conn: Connection, device: str, tmpdir: str, forkserver: ForkServer) -> None:
        """`forkserver`: this judge's, already launched (hardware.judge.process starts it first)."""
        import torch
        import triton

        self.conn = conn
        self.tmpdir = tmpdir
        _raise_open_files_limit()
        if device == "cuda":
            torch.cuda.init()
            device_name = torch.cuda.get_device_name(0)
        else:
            device_name = "cpu (Triton interpreter)"
        self.interpret = os.environ.get("TRITON_INTERPRET") == "1"
        versions = Versions(
            torch=torch.__version__,
            triton=triton.__version__,
            python=sys.version.split()[0],
            cuda=torch.version.cuda if device == "cuda" else None,
        )
        self.device = Device(torch, device, device_name, versions)
        self.references = ReferenceCache(self.device)
        self.target, self.target_profile = self._detect_target()
        self.forkserver = forkserver
        # A task's first job runs its forward on the meta device (its inputs' footprint: judge/inputs.py),
        # whose Python meta kernels import torch._dynamo (~1.2 s) on first use: imported here, beside the
        # wait for the fork server's own start-up, it costs the first job nothing.
        warm = threading.Thread(target=importlib.import_module, args=("torch._dynamo",), daemon=True)
        warm.start()
        self.forkserver.start()  # pay for the imports now, not in the first job
        warm.join()
        self.ipc = IpcState(usable=device == "cuda")
        """Lend device buffers to candidate processes through CUDA IPC (until it fails before it ever worked)."""

    def _detect_target(self) -> tuple[str, dict[str, Any] | None]:
        fallback = "cpu-interpreter" if self.device.kind == "cpu" else self.device.name
        try:
            from kernelwright.hardware.targets import detect_target

            target = detect_target(self.device.kind)
        except Exception as exc:  # an unknown device must not stop evaluation; its name still identifies it
            print(f"detect_target failed: {exc}", file=sys.stderr)
            return fallback, None
        return target.name, target.model_dump(mode="json")

    def info(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "device": self.device.kind,
            "device_name": self.device.name,
            "target": self.target,
            "target_profile": self.target_profile,
            "versions": self.device.versions.model_dump(),
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

    # ----------------------------------------------------------------- one job
    def run_job(self, message: dict[str, Any]) -> tuple[EvalResult, bool]:
        """One job from the pool's message (a JobRequest's fields): its result, and whether the pool must
        replace this judge."""
        request = JobRequest.model_validate(message)
        cfg = request.config
        res = EvalResult(stage="compile", precision=cfg.precision, device=self.device.name,
                         target=self.target, versions=self.device.versions)  # fmt: skip
        res.extra["notes"] = []
        job = JobState(
            request, res, self.conn.send, TimeBudget(cfg.stage_timeout("reference") * _FP64_BUDGET_SHARE)
        )
        os.ftruncate(1, 0)  # the log holds this job's output only (stdout and stderr share it, O_APPEND)
        if self.device.cuda:
            self.device.torch.cuda.reset_peak_memory_stats()
        try:
            self.device.apply_precision(cfg.precision)
            self._run(job)
        except Stop:
            pass
        except Exception as exc:
            # A CUDA error in the judge's own work poisons its context: it must be replaced.
            job.restart = classify_exception(exc) == "crash"
            res.correct = False
            res.error_kind = "harness_error"
            res.error = harness_failure("harness", exc)
        finally:
            if job.proc is not None:
                res.extra["confinement"] = job.proc.info.get("confinement")
                t0 = time.perf_counter()
                job.proc.close()
                job.phases.update({f"candidate {k}": v for k, v in job.proc.spent.items()})
                job.peaks = dict(job.proc.peaks)
                job.phases["candidate close"] = time.perf_counter() - t0
                job.proc = None
            res.extra["phases_s"] = {k: round(v, 4) for k, v in job.phases.items()}
            # The seeds are told only now, with the candidate process gone: to reproduce the verdict.
            if job.seeds is not None:
                res.extra["input_seeds"] = job.seeds.as_json()
            self.references.forget_samples()  # this job's inputs are never used again
            if self.device.cuda:  # the judge's own share of the device memory this job needed
                memory = res.extra.setdefault("memory", {})
                memory["judge_peak_allocated_bytes"] = int(self.device.torch.cuda.max_memory_allocated())
                memory["judge_peak_reserved_bytes"] = int(self.device.torch.cuda.max_memory_reserved())
                if job.peaks:
                    memory["candidate_reported_peak_allocated_bytes"] = dict(job.peaks)
                self.device.torch.cuda.empty_cache()
        return res, job.restart

    def _run(self, job: JobState) -> None:
        cfg, res = job.cfg, job.result
        res.torch_ops_remaining = list(job.request.torch_ops_remaining)
        notes = job.notes
        notes.append(
            f"precision {cfg.precision}: TF32 {'on' if cfg.precision != 'strict' else 'off'} for matmul and "
            "cuDNN conv, reference included"
        )
        # The reference first, under its own time limit: a slow reference is not the candidate's fault.
        job.stage("reference")
        t_ref = time.perf_counter()
        budget, references = job.fp64_budget, self.references
        try:
            task = references.task(job.request.task_source, job.request.task_name)
            shapes = verified_shapes(task, cfg, self.device.kind)
            references.fits(task, shapes[0], res.extra)
            job.seeds = seeds = draw_seeds(shapes, cfg)
            refs = {s.label: references.reference(task, s, cfg.seed, seeds.parameters) for s in shapes}
            smallest = refs[shapes[-1].label]
            references.modes(task, smallest, cfg.seed)
            modes = task.modes or ["train"]
            for s in shapes:
                n = trial_count(cfg, s is shapes[0])
                for trial in range(n if not refs[s.label].lean else 0):  # a large task: on demand
                    references.sample(refs[s.label], seeds.trials[s.label][trial], cfg.precision, budget=budget,
                                      fp64=cfg.reference_fp64, mode=modes[trial % len(modes)])  # fmt: skip
            probe = references.sample(smallest, seeds.trials[shapes[-1].label][0], cfg.precision, budget=budget,
                                      fp64=cfg.reference_fp64, mode=modes[0])  # fmt: skip
            job.ref_ops = references.reference_ops(task, smallest, probe)
            del probe
        except Unverifiable as exc:
            job.fail("compile", "harness_error", f"the task cannot be judged here: {exc}")
        except Exception as exc:
            job.restart = classify_exception(exc) == "crash"
            job.fail("compile", "harness_error", f"the reference could not run: {exc}")
        origin = {"full": "get_inputs()", "small": "get_small_inputs()"}
        for s in shapes:
            notes.append(f"verified on {s.label} inputs ({s.note or origin.get(s.label, '')})")
        if len(shapes) == 1:
            notes.append("no second input shape: the task has no get_small_inputs() and its size constants "
                         "could not be changed" if cfg.second_shape else "second shape switched off")  # fmt: skip
        notes.append(PARAMETERS_NOTE)
        if task.modes_note:
            notes.append(task.modes_note)

        job.phases["reference"] = time.perf_counter() - t_ref
        job.stage("compile")
        memory = None
        if not self.device.cuda:  # the candidate process's address-space limit
            footprint = max(self._footprint(refs[s.label], cfg, seeds.trials[s.label][0]) for s in shapes)
            memory = _CPU_MEMORY_BASE + _CPU_MEMORY_FACTOR * footprint
        try:
            job.proc = proc = CandidateProcess(self.forkserver)
            proc.limit_s = cfg.stage_timeout("compile")
        except Exception as exc:
            job.fail("compile", "harness_error", f"could not start a candidate process: {exc}")
        try:
            proc.wait_ready(min(job.remaining(), _CANDIDATE_START_S))
            session = CandidateSession(job, proc, self.device, self.ipc)
            session.load(shapes, refs, memory)
            for shp in shapes:
                first = references.sample(
                    refs[shp.label], seeds.trials[shp.label][0], cfg.precision, budget=budget, mode=modes[0]
                )
                session.attach(refs[shp.label], first)
            del first  # a large task holds one trial's tensors at a time (ref.samples), not two
            verify(job, references, session, task, shapes, refs)
            if not self.device.cuda or not cfg.time:
                proc.in_step(max(job.remaining(), 5.0))
                res.stage = "done"
                res.timing_meaningful = False
                res.timing_note = (
                    "not timed: the Triton interpreter on CPU says nothing about GPU speed"
                    if not self.device.cuda
                    else "not timed (time=False)"
                )
                return
            time_candidate(job, references, session, task, refs[shapes[0].label])
        except CandidateGone as gone:
            stage = {"compile": "compile", "correctness": "correctness", "timing": "timing",
                     "baseline": "timing"}.get(job.stage_name, "compile")  # fmt: skip
            job.fail(stage, gone.kind, gone.text)

    def _footprint(self, ref: Reference, cfg: EvalConfig, seed: int) -> int:
        sample = next(v for k, v in ref.samples.items() if k[:2] == (seed, cfg.precision))
        tensors = tensors_of(sample.inputs) + tensors_of(sample.out) + list(ref.model.state_dict().values())
        return sum(t.numel() * t.element_size() for t in tensors)
