"""Optimizing a whole model region by region (`kernelwright optimize-model`, `kernelwright.optimize_model`).

    model task file -> split (tasks/regions.py) -> one task file per region signature
        -> per signature: a kernel memory already holds for it on this target, else a search
           (graphs/optimize.py run_optimize, the same graph, judge and memory as any task)
        -> the stitch (tasks/region_stitch.py) -> judged whole as a candidate of the model's task

The run folder holds model.py (the model's task), regions/region_<signature>.py (each region's task) and
regions/<signature>/ (its run folder), stitched.py (the candidate: `kernelwright eval model.py
stitched.py` judges it again), model.json and model.md (the region table). Identical regions are searched
once; a signature whose kernel memory holds is not searched again on the CPU (there a search establishes
correctness only) and, on a GPU, not searched again when memory's kernel for it on this target was timed at
or over the roofline stop (`Context.roofline_stop`, a fraction of the roofline floor: the fraction at which
a search of it would stop); a kernel short of that is searched again from memory's retrieval of it.
A region that cannot be written as a task, or for which no correct kernel is found, keeps its torch
operations in the stitched model.
"""

from __future__ import annotations

import dataclasses
import time
import types
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from kernelwright.nodes.model_report import write_model_report, written_on_crash
from kernelwright.nodes.run_context import Context

if TYPE_CHECKING:
    from kernelwright.hardware.result import EvalResult


class RegionRow(BaseModel):
    """One region signature's outcome (the rows of the region table)."""

    signature: str
    regions: list[int]
    ops: list[str]
    status: str
    """searched, from memory, kept in torch (why in `note`)."""
    note: str = ""
    evaluations: int = 0
    correct: bool = False
    speedup: float | None = None
    share: float = 0.0
    """Share of the model's eager time (its regions' torch operations, measured once on the example
    inputs while splitting, on this machine)."""
    run_dir: str = ""
    search_s: float | None = None
    """Wall seconds of this run's search of the region (None: not searched in this run)."""


class ModelResult(BaseModel):
    model: str
    run_dir: str
    regions: int
    signatures: int
    regions_with_kernel: int
    evaluations: int
    split_s: float
    rows: list[RegionRow] = Field(default_factory=list)
    stitched: str = ""
    correct: bool | None = None
    """The stitched model's verdict from the judge (None: not judged, no region has a kernel)."""
    speedup: float | None = None
    slower_than_eager: bool | None = None
    """The stitched model is correct and timed slower than the reference: the answer is the reference
    (None: not timed)."""
    verdict: str = ""
    judge_s: float | None = None
    """Seconds the judge took over the stitched model (None: not judged)."""
    wall_s: float = 0.0


class ModelProgress(BaseModel):
    model: str
    done: int
    total: int
    evaluations: int
    best: float | None = None
    """Best region speedup so far (None where timing is not meaningful, e.g. the CPU)."""
    line: str = ""


def _exec_task(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = name
    exec(compile(source, name, "exec"), module.__dict__)  # the user's own model code, as loading it does
    return module


def model_task_source(path: Path, class_name: str | None) -> str:
    """The model's task file text: the file itself, with `Model = CLASS` added for FILE:CLASS."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
    if class_name and class_name != "Model":
        source += f"\n\nModel = {class_name}\n"
    return source


def region_kernels(
    memory: Any, target: str, *, at_floor: float | None = None, faster: bool = False
) -> dict[str, str]:
    """Region signature -> the code of the fastest correct kernel memory holds for it on `target`, read in one
    pass over memory's cases (a model has many regions; memory may hold many cases). With `at_floor`, only
    a kernel whose measured time reached that fraction of the roofline floor (one a search would have
    stopped at); with `faster`, only a kernel measured faster than the region's torch operations. A kernel
    that was never timed qualifies for neither."""
    if memory is None:
        return {}
    best: dict[str, tuple[float, str]] = {}
    for case in memory.cases.iter_all():
        if not (
            case.task_name.startswith("region_") and case.correct and case.hardware == target and case.code
        ):
            continue
        if at_floor is not None and (case.fraction_of_floor or 0.0) < at_floor:
            continue
        if faster and (case.speedup or 0.0) <= 1.0:
            continue
        signature, score = case.task_name.removeprefix("region_"), case.speedup or 0.0
        if signature not in best or score > best[signature][0]:
            best[signature] = (score, case.code)
    return {signature: code for signature, (_, code) in best.items()}


def target_name(ctx: Context) -> str:
    from kernelwright.hardware.targets import detect_target, get_target

    return (get_target(ctx.target) if ctx.target else detect_target(ctx.check_usable())).name


@written_on_crash  # report.html keeps the regions done when the run stops with an error
def optimize_model_source(
    source: str,
    name: str,
    context: Context | None = None,
    run_dir: str | Path | None = None,
    *,
    on_progress: Callable[[ModelProgress], None] | None = None,
    judge: bool = True,
) -> ModelResult:
    """Optimize the model of a KernelBench-format task source (Model, get_inputs, get_init_inputs)."""
    from kernelwright.graphs.optimize import run_optimize
    from kernelwright.nodes import resources
    from kernelwright.nodes.records import OptimizeResult
    from kernelwright.tasks.region_stitch import stitched_source
    from kernelwright.tasks.regions import split_model

    t0 = time.perf_counter()
    ctx = context or Context()
    device = ctx.check_usable()
    module = _exec_task(source, name)
    for needed in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, needed):
            raise ValueError(f"{name}: the model file defines no {needed}")
    model = module.Model(*module.get_init_inputs())
    inputs = list(module.get_inputs())
    split = split_model(model, inputs)
    rd = Path(run_dir or ctx.default_run_dir(name, uuid.uuid4().hex)).resolve()
    same_model = (rd / "model.py").is_file() and (rd / "model.py").read_text(encoding="utf-8") == source
    if rd.exists() and any(rd.iterdir()) and not same_model:
        raise ValueError(f"run folder {rd} is not empty: give a new folder")
    (rd / "regions").mkdir(parents=True, exist_ok=True)  # the same model's folder: finished regions kept
    (rd / "model.py").write_text(source, encoding="utf-8")
    memory_loc = resources.memory_location(ctx.memory, rd)
    memory = None if memory_loc == resources.MEMORY_OFF else resources.open_shared_memory(memory_loc)
    region_ctx = dataclasses.replace(ctx, memory=memory_loc, run_dir=None)
    target = target_name(ctx)
    total_time = sum(v.seconds for v in split.values.values()) or 1.0
    rows: list[RegionRow] = []
    kernels: dict[int, tuple[str, str]] = {}
    evaluations = 0
    best: float | None = None
    groups = split.unique()
    # on a GPU only a kernel at its roofline stop is final; a CPU search establishes correctness only
    stop = None if device == "cpu" else ctx.roofline_stop
    held = region_kernels(memory, target, at_floor=stop) if device == "cpu" or stop is not None else {}

    def report(line: str) -> None:
        write_model_report(rd, name, split, rows, evaluations, line=line)
        if on_progress is not None:
            on_progress(ModelProgress(model=name, done=len(rows), total=len(groups), evaluations=evaluations,
                                      best=best, line=line))  # fmt: skip

    for signature, regions in groups.items():
        first = regions[0]
        row = RegionRow(signature=signature, regions=[r.index for r in regions], ops=first.ops, status="",
                        share=sum(split.values[n].seconds for r in regions for n in r.nodes) / total_time)  # fmt: skip
        code: str | None = None
        if not first.source:
            row.status, row.note = "kept in torch", f"not written as a task: {first.why_not}"
        else:
            task_file = rd / "regions" / f"region_{signature}.py"
            task_file.write_text(first.source, encoding="utf-8")
            code = held.get(signature)
            if code is not None:
                row.status, row.correct = "from memory", True
                row.note = "a correct kernel memory held" + (
                    f", at {stop:.0%} of the roofline floor or over" if stop else ""
                )
            else:
                report(f"region {row.regions} {' + '.join(first.ops)}: searching")
                row.run_dir = str(rd / "regions" / signature)
                try:
                    done = Path(row.run_dir) / "found.json"
                    if done.is_file():  # searched by an earlier run of this model
                        found = OptimizeResult.model_validate_json(done.read_text(encoding="utf-8"))
                    else:  # a region run an interrupted run of this model started is continued, not refused
                        started = (Path(row.run_dir) / "run.json").is_file()
                        t_search = time.perf_counter()
                        found = run_optimize(
                            task_file, region_ctx, row.run_dir, resume=started, close_pools=False
                        )
                        row.search_s = round(time.perf_counter() - t_search, 2)
                        done.write_text(found.model_dump_json(), encoding="utf-8")
                except Exception as exc:  # one region's failure keeps it in torch, never the model's
                    row.status, row.note = "kept in torch", f"search failed: {str(exc).splitlines()[0][:200]}"
                else:
                    row.evaluations = found.cost.evaluations
                    evaluations += row.evaluations
                    row.status, row.correct = "searched", found.correct
                    if found.best is not None and found.correct:
                        row.speedup = found.best.speedup_vs_eager
                        slower = found.timing_meaningful and (row.speedup or 0.0) < 1.0
                        if slower:
                            row.note = "its kernel was slower than torch: torch kept"
                        else:
                            code = found.best.code
                    else:
                        row.note = "no correct kernel found: torch kept"
        if code is not None:
            for r in regions:
                kernels[r.index] = (signature, code)
            if row.speedup is not None:
                best = max(best or 0.0, row.speedup)
        rows.append(row)
        report(f"region {row.regions}: {row.status}")
    result = ModelResult(
        model=name,
        run_dir=str(rd),
        regions=len(split.regions),
        signatures=len(groups),
        regions_with_kernel=len(kernels),
        evaluations=evaluations,
        split_s=split.seconds,
        rows=rows,
    )
    if kernels:
        plans = [r.plan() for r in split.regions]
        stitched = stitched_source(source, split.leaves, plans, kernels, name, spec=split.spec)
        (rd / "stitched.py").write_text(stitched, encoding="utf-8")
        result.stitched = str(rd / "stitched.py")
        if judge:
            report("the stitched model: judging (train and eval, two shapes, timed where a GPU runs it)")
            t_judge = time.perf_counter()
            _judge(result, rd, ctx)
            result.judge_s = round(time.perf_counter() - t_judge, 2)
    else:
        result.verdict = "no region has a kernel: the reference model stands"
    result.wall_s = time.perf_counter() - t0
    write_report(result, rd)
    write_model_report(rd, name, split, rows, evaluations, result=result)
    return result


def _judge(result: ModelResult, rd: Path, ctx: Context) -> None:
    from kernelwright.hardware import EvalConfig, evaluate
    from kernelwright.tasks import load_task

    task = load_task(rd / "model.py")
    precision: Any = ctx.precision
    config = EvalConfig(device="cpu" if ctx.check_usable() == "cpu" else "cuda", precision=precision)
    verdict = evaluate(task, (rd / "stitched.py").read_text(encoding="utf-8"), config)
    take_verdict(result, verdict)
    (rd / "stitched_eval.json").write_text(verdict.model_dump_json(indent=2), encoding="utf-8")


def take_verdict(result: ModelResult, verdict: EvalResult) -> None:
    """The judge's verdict on the stitched model into `result`: correct or not, its speedup
    where timed, and one line that says plainly when it is slower than the reference, whose answer is then the
    reference model (as a task's verdict says of a best kernel slower than eager)."""
    result.correct = bool(verdict.correct)
    result.speedup = verdict.speedup_vs_eager if verdict.timing_meaningful else None
    if not verdict.correct:
        result.verdict = (verdict.error or verdict.summary())[:400]
        return
    result.verdict = verdict.summary()
    if result.speedup is not None:
        result.slower_than_eager = result.speedup < 1.0
        if result.slower_than_eager:
            slower = f"SLOWER than eager PyTorch ({result.speedup:.2f}x)"
            result.verdict += f"; the stitched model is {slower}: keep the reference model"


def write_report(result: ModelResult, rd: Path) -> None:
    """model.json and model.md (the region table) in the run folder."""
    (rd / "model.json").write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    lines = [
        f"# {result.model}: {result.regions_with_kernel}/{result.regions} regions with a kernel",
        "",
        f"{result.regions} regions, {result.signatures} signatures, {result.evaluations} evaluations, "
        f"split in {result.split_s:.2f} s, "
        + (f"judged whole in {result.judge_s:.1f} s, " if result.judge_s is not None else "")
        + f"{result.wall_s:.1f} s in all.",
        f"Stitched model: {result.verdict or 'not judged'}",
        "",
        "| regions | operators | status | speedup | share of time | evaluations | search s | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result.rows:
        speed = f"{row.speedup:.2f}x" if row.speedup is not None else "-"
        searched = f"{row.search_s:.1f}" if row.search_s is not None else "-"
        lines.append(
            f"| {','.join(map(str, row.regions))} | {' + '.join(row.ops)} | {row.status} | {speed} | "
            f"{100 * row.share:.1f}% | {row.evaluations} | {searched} | {row.note} |"
        )
    (rd / "model.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def optimize_model_file(
    path: str | Path, class_name: str | None = None, context: Context | None = None, **kwargs: Any
) -> ModelResult:
    """`optimize-model FILE[:CLASS]`: a KernelBench-format file (get_inputs, get_init_inputs)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: model file not found")
    name = p.stem if not class_name else f"{p.stem}-{class_name}"
    return optimize_model_source(model_task_source(p, class_name), name, context, **kwargs)


_CONTEXT_FIELDS = frozenset(f.name for f in dataclasses.fields(Context) if f.init) - {"run_dir"}
"""optimize_model's keywords that set the run's Context (its run folder is `run_dir`, optimize_model_source's)."""


def optimize_model(
    model: Any,
    example_inputs: Sequence[Any],
    init_inputs: Sequence[Any] = (),
    context: Context | None = None,
    **kwargs: Any,
) -> ModelResult:
    """Optimize an nn.Module whose class is defined in a file: that file's code, the class as `Model`
    built from `init_inputs` and `example_inputs` saved beside it, is the model's task. The run's options
    are `context`'s, or Context's fields given as keywords (`device="cpu", budget=2`); `run_dir`,
    `on_progress` and `judge` are optimize_model_source's."""
    import inspect

    import torch

    options = {k: kwargs.pop(k) for k in list(kwargs) if k in _CONTEXT_FIELDS}
    unknown = sorted(set(kwargs) - {"run_dir", "on_progress", "judge"})
    if unknown:
        raise TypeError(
            f"optimize_model() got unknown keyword {', '.join(unknown)}; options are Context's fields "
            f"({', '.join(sorted(_CONTEXT_FIELDS))}), run_dir, on_progress and judge"
        )
    if options:
        context = dataclasses.replace(context or Context(), **options)
    cls = type(model)
    try:
        file_source = inspect.getsource(inspect.getmodule(cls))  # type: ignore[arg-type]
    except (OSError, TypeError) as exc:
        raise ValueError(f"{cls.__name__}: its source file cannot be read ({exc})") from exc
    rd = Path(kwargs.pop("run_dir", None) or (context or Context()).default_run_dir(
        cls.__name__, uuid.uuid4().hex))  # fmt: skip
    rd.mkdir(parents=True, exist_ok=True)
    torch.save({"inputs": list(example_inputs), "state": model.state_dict()}, rd / "example.pt")
    source = (
        file_source
        + f"\n\nModel = {cls.__name__}\n\n\ndef get_inputs():\n"
        + f"    return torch.load({str(rd / 'example.pt')!r})['inputs']\n\n\n"
        + f"def get_init_inputs():\n    return {list(init_inputs)!r}\n"
    )
    if "import torch\n" not in file_source:
        source = "import torch\n" + source
    return optimize_model_source(source, cls.__name__, context, run_dir=rd / "run", **kwargs)


def bench_model_row(
    path: Path, ctx: Context, run_dir: Path, on_progress: Callable[[ModelProgress], None] | None = None
) -> dict[str, Any]:
    """A bench row's fields for a whole model (a level-3 task) run region by region."""
    result = optimize_model_file(path, None, ctx, run_dir=run_dir, on_progress=on_progress)
    status = "correct" if result.correct else ("incorrect" if result.correct is False else "unsupported")
    return {
        "status": status,
        "correct": bool(result.correct),
        "speedup_vs_eager": result.speedup,
        "timing_meaningful": result.speedup is not None,
        "evaluations": result.evaluations,
        "wall_s": round(result.wall_s, 2),
        "verdict": f"{result.regions_with_kernel}/{result.regions} regions with a kernel; {result.verdict}",
        "design": f"regions={result.regions} signatures={result.signatures}",
    }
