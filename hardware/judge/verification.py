"""The judge's verification stage: every trial on every shape compared with the reference (hardware.judge.compare
has the tolerance table), the runtime evidence of every forward analysed (hardware.judge.evidence, as each call
is read: hardware.judge.session) and, on a GPU, the library kernels the profiler saw in one more forward
cross-checked against recorded torch ops. Functions of the job, the reference cache
(hardware.judge.reference) and the candidate session (hardware.judge.session)."""

from __future__ import annotations

from typing import Any

from kernelwright.hardware.judge.evidence import Provenance
from kernelwright.hardware.judge.job import JobState
from kernelwright.hardware.judge.records import Reference, Sample, Shape, TaskState
from kernelwright.hardware.judge.reference import ReferenceCache
from kernelwright.hardware.judge.session import CandidateSession
from kernelwright.hardware.judge.tensors import tensors_of


def verify(job: JobState, references: ReferenceCache, session: CandidateSession, task: TaskState, shapes: list[Shape],
           refs: dict[str, Reference]) -> None:  # fmt: skip
    """Every trial on every shape: the candidate's output against the reference's, its evidence judged.
    Sets the result's errors, tolerance and trials; `job.fail` on the first that does not pass."""
    from kernelwright.hardware.judge.compare import compare_outputs
    from kernelwright.hardware.judge.inputs import trial_count

    cfg, res, seeds = job.cfg, job.result, job.seeds
    assert seeds is not None

    first = True
    max_abs = max_rel = 0.0
    tolerances = []
    for s_index, shape in enumerate(shapes):
        ref = refs[shape.label]
        trials = trial_count(cfg, s_index == 0)
        for trial in range(trials):
            seed = seeds.trials[shape.label][trial]
            modes = task.modes or ["train"]
            mode = modes[trial % len(modes)]
            sample = references.sample(ref, seed, cfg.precision, budget=job.fp64_budget, fp64=cfg.reference_fp64,
                                  mode=mode)  # fmt: skip
            if trial == 0:
                res.shapes_checked.append([list(t.shape) for t in tensors_of(sample.inputs)])
            # Every call is recorded and its evidence judged as it is read (CandidateSession.call); this one
            # (past the first call's compiling and autotuning) is the one reported, and on a GPU it also
            # runs one more forward under the profiler.
            reported = s_index == 0 and trial == 1
            out, reply = session.call(ref, sample, "compile" if first else "correctness",
                                    profile=reported, mode=mode, reset=task.stateful)  # fmt: skip
            if first:
                first = False
                res.stage = "correctness"
                job.stage("correctness")
            ref64 = sample.out64 if cfg.reference_fp64 else None
            cmp = compare_outputs(out, sample.out, cfg.precision, rtol=cfg.rtol, atol=cfg.atol, ref64=ref64)
            if trial == 0:
                _note_fp64(job, shape.label, sample if cfg.reference_fp64 else None, cmp.notes)
            res.trials = max(res.trials, trial + 1)
            if not cmp.ok:
                res.max_abs_error, res.max_rel_error = cmp.max_abs_error, cmp.max_rel_error
                res.mismatched = cmp.mismatched or None
                res.tolerance = cmp.tolerances[-1] if cmp.tolerances else None
                in_shapes = [list(t.shape) for t in tensors_of(sample.inputs)]
                in_mode = f", {mode} mode" if len(modes) > 1 or mode != "train" else ""
                job.fail("correctness", cmp.error_kind or "mismatch",
                           f"{cmp.report}\n({shape.label} inputs {in_shapes}, trial {trial + 1}/{trials}, "
                           f"seed {seed}{in_mode})")  # fmt: skip
            prov = judge_evidence(job, reply)
            if reported:
                report = reply.get("evidence")
                res.kernel_launches = prov.triton_launches
                res.extra["torch_ops_in_source"] = list(res.torch_ops_remaining)
                res.torch_ops_remaining = prov.torch_ops  # what ran, which the source scan only guessed
                if session.device.cuda and isinstance(report, dict):
                    _check_kernels(job, report)
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


def judge_evidence(job: JobState, reply: dict[str, Any]) -> Provenance:
    """The runtime evidence of one call (hardware.judge.evidence.analyse), failing the candidate on it."""
    from kernelwright.hardware.judge.evidence import analyse

    report = reply.get("evidence")
    if not isinstance(report, dict):
        job.fail("run", "forbidden", "the candidate process sent no evidence for a recorded call")
    prov = analyse(report, job.ref_ops)
    if not prov.ok:
        job.fail("run", prov.error_kind or "torch_fallback", prov.reason)
    return prov


def _check_kernels(job: JobState, report: dict[str, Any]) -> None:
    """GPU: library kernels the profiler saw in one forward must have a recorded torch op behind them."""
    kernels = report.get("kernels")
    launch_names = report.get("launch_names") or {}
    if not isinstance(kernels, dict) or "<profiler unavailable>" in kernels:
        job.notes.append("GPU profiler unavailable: kernels not cross-checked")
        return
    library = {k: v for k, v in kernels.items()
               if isinstance(k, str) and k not in launch_names and not _is_transfer(k)}  # fmt: skip
    aten_events = [e for e in report.get("events", []) if isinstance(e, list) and e and e[0] == "aten"]
    job.result.extra["gpu_kernels"] = {"triton": sum(v for k, v in kernels.items() if k in launch_names),
                                "library": sum(library.values())}  # fmt: skip
    if library and not aten_events:
        names = ", ".join(sorted(library)[:4])
        job.fail("run", "forbidden", f"the GPU ran library kernels ({names}) that no recorded torch op "
                   "launched: work was done out of the harness's sight")  # fmt: skip


def _note_fp64(job: JobState, shape_label: str, sample: Sample | None, cmp_notes: list[str]) -> None:
    """Say, once per input shape, what the values were compared against and with what allowance."""
    status = (sample and sample.fp64_status) or "not used: switched off (reference_fp64=False)"
    job.result.extra.setdefault("float64_reference", {})[shape_label] = status
    notes = job.notes
    if status.startswith("unavailable"):
        notes.append(
            f"{shape_label} inputs: float64 reference {status}; compared against the float32 reference "
            "alone (no reference-error allowance)"
        )
    notes.extend(f"{shape_label} inputs (trial 1): {n}" for n in cmp_notes)


def _is_transfer(kernel: str) -> bool:
    low = kernel.lower()
    return "memcpy" in low or "memset" in low
