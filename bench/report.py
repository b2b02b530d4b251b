"""What a bench reports, as data: one row per task, and aggregates per suite, per op family and overall.

The three files written from them (suite.json, suite.md, suite.html) are rendered in
bench/render.py. Pure Python (pydantic, no torch): the bench's coordinator rewrites the files after
every finished task, and tests build them from rows directly.

Definitions (the same in every file):
- a task is *finished* once its row is recorded, whatever the outcome; aggregates count finished tasks
  (`tasks`), so a partial bench reports what it has, and says how many of how many are finished;
- `correct_share`: correct tasks / finished tasks;
- geometric means (`geomean_vs_eager`, `geomean_vs_compile`) are over correct tasks with a measured
  speedup, and `n` says how many that is; `mean_fraction_of_floor` likewise (an arithmetic mean);
- `fast_p` (KernelBench's metric): for each p in `P_GRID` (0 to 3 in steps of 0.05), the share of all
  finished tasks that are correct AND have a measured speedup greater than p; a failed, incorrect or
  untimed task counts as not fast. Given against eager PyTorch and against torch.compile; null where
  nothing was timed (on CPU, where timings are not meaningful), and vs torch.compile also where none of
  the group's timed tasks has that baseline; `measured_eager`/`measured_compile` say how many correct
  tasks have the speedup measured;
- `holds_unseen_share`: of the correct tasks whose best kernel was judged at unseen sizes (`--unseen K`,
  bench/unseen.py), the share correct at every one; `geomean_unseen_vs_searched`: the geomean of
  (speedup at the unseen sizes / speedup at the searched size) over those that hold and were timed;
- `repeats_per_100`: judged candidates that repeated an earlier failure of their task (the same program
  up to its config, the same error kind and message; nodes/repeats.py) per 100 candidates; `blocked`
  counts the repeats stopped before the judge;
- a task's `family` is the heaviest op family its reference runs (conv over matmul over scan, loss,
  softmax, norm, pool, reduction, pointwise, other; `families` lists them all), from the loaded task's
  `signature.op_families`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1

Status = Literal["correct", "incorrect", "unsupported", "harness_error", "load_error", "error", "pending"]
FINAL_STATUSES: frozenset[str] = frozenset(
    {"correct", "incorrect", "unsupported", "harness_error", "load_error"}
)
"""Outcomes a resumed bench does not run again. An `error` (the run raised, or its worker died) is
recorded too, and run again (continued from its run directory) by the next --resume."""
FAILED_STATUSES: frozenset[str] = frozenset({"harness_error", "load_error", "error"})

FAMILY_ORDER = (
    "conv",
    "matmul",
    "scan",
    "loss",
    "softmax",
    "norm",
    "pool",
    "reduction",
    "pointwise",
    "other",
)
P_GRID: tuple[float, ...] = tuple(round(i * 0.05, 2) for i in range(61))


def primary_family(families: Sequence[str]) -> str:
    """The heaviest family in `families` (a conv with a fused BatchNorm is a conv task)."""
    for f in FAMILY_ORDER:
        if f in families:
            return f
    return families[0] if families else "other"


class TaskRow(BaseModel):
    """One task of a bench: one line of tasks.jsonl, one entry of suite.json's `tasks`."""

    model_config = ConfigDict(extra="ignore")

    id: str
    """<suite>/<task>: unique in the bench."""
    suite: str
    """The folder the task came from (a KernelBench checkout's level1, level2, ...)."""
    task: str
    path: str
    family: str = "other"
    families: list[str] = Field(default_factory=list)
    status: Status = "pending"
    correct: bool = False
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    fraction_of_floor: float | None = None
    runtime_ms: float | None = None
    runtime_p20_ms: float | None = None
    runtime_p80_ms: float | None = None
    """The best kernel's timed calls' 20th and 80th percentiles (a wide spread: see Timing)."""
    eager_ms: float | None = None
    compile_ms: float | None = None
    floor_ms: float | None = None
    timing_meaningful: bool = False
    precision: str = ""
    design: str = ""
    """The best kernel's `# kernelwright:` line (family, design, config), or its Triton kernels' names."""
    evaluations: int = 0
    evaluations_to_best: int | None = None
    """The best kernel's place among the task's candidates, in the order they were made (1: the first)."""
    llm_calls: int = 0
    wall_s: float = 0.0
    """Seconds the task's search ran (summed over the processes that ran it)."""
    gpu_s: float = 0.0
    """Seconds its candidates' evaluations spent on a GPU (0 on CPU)."""
    verdict: str = ""
    """The run's verdict sentence, or what stopped the task."""
    stop_reason: str = ""
    error: str = ""
    worker: str = ""
    """Which worker ran it: "gpu 0", "gpu 1", ... or "cpu"."""
    device_name: str = ""
    versions: dict[str, str | None] = Field(default_factory=dict)
    run_dir: str = ""
    """The task's run directory, relative to the bench folder (kernel.py, result.json, report.html)."""
    attempts: list[dict[str, Any]] = Field(default_factory=list)
    """Every tried candidate: id, parent, action, status, design, runtime_ms, error_kind."""
    candidates: int = 0
    """Candidates the search made (blocked repeats included)."""
    failed_by_kind: dict[str, int] = Field(default_factory=dict)
    """Failed candidates that were judged (or rejected by the static check), by error kind."""
    repeats: int = 0
    """Judged candidates that repeated an earlier failure of the task: the same program up to its config,
    failing with the same error kind and message (nodes/repeats.py; the goal is 0)."""
    blocked: int = 0
    """Candidates stopped before the judge because they repeated a failure or used a closed design."""
    closed_designs: list[str] = Field(default_factory=list)
    """Designs two identical failures closed for the task."""
    unseen: list[dict[str, Any]] = Field(default_factory=list)
    """The best kernel judged at sizes the search never saw (bench/unseen.py): per size, the
    constants changed, input shapes, correct, error kind and message, speedups and runtime."""
    holds_unseen: bool | None = None
    """Correct at every unseen size judged; None when not checked (no kernel, --unseen 0, no size made)."""
    unseen_speedup_vs_eager: float | None = None
    """Geomean speedup vs eager at the unseen sizes (None where timing is not meaningful)."""
    unseen_vs_searched: float | None = None
    """unseen_speedup_vs_eager over the searched speedup vs eager."""
    unseen_note: str = ""
    unseen_wall_s: float | None = None
    """Seconds the unseen sizes took to judge (each one's eager and torch.compile timed too): outside wall_s."""
    finished_at: str = ""

    @property
    def finished(self) -> bool:
        return self.status != "pending"


class Figure(BaseModel):
    """A summary number and how many tasks it covers."""

    value: float | None = None
    n: int = 0


class FastP(BaseModel):
    p: list[float] = Field(default_factory=lambda: list(P_GRID))
    vs_eager: list[float] | None = None
    vs_compile: list[float] | None = None
    measured_eager: int = 0
    """Correct tasks with a measured speedup vs eager (the rest count as not fast)."""
    measured_compile: int = 0
    tasks: int = 0
    """The denominator: finished tasks of the group."""

    def at(self, p: float, which: Literal["eager", "compile"]) -> float | None:
        values = self.vs_eager if which == "eager" else self.vs_compile
        if values is None:
            return None
        return values[self.p.index(p)]


class Aggregate(BaseModel):
    name: str
    tasks: int = 0
    """Finished tasks (the denominator of every share)."""
    total: int = 0
    """Tasks of the group in the bench, finished or not."""
    correct: int = 0
    correct_share: float | None = None
    failed: int = 0
    """Tasks that could not be judged or run: harness_error, load_error, error."""
    faster_than_eager: int = 0
    faster_than_compile: int = 0
    geomean_vs_eager: Figure = Field(default_factory=Figure)
    geomean_vs_compile: Figure = Field(default_factory=Figure)
    mean_fraction_of_floor: Figure = Field(default_factory=Figure)
    fast_p: FastP = Field(default_factory=FastP)
    evaluations: int = 0
    evaluations_to_best: int = 0
    """Summed over the tasks with a correct kernel: how many candidates each took to reach its best."""
    wall_s: float = 0.0
    gpu_s: float = 0.0
    unseen_checked: int = 0
    """Correct tasks whose best kernel was judged at unseen sizes."""
    holds_unseen: int = 0
    holds_unseen_share: float | None = None
    """holds_unseen / unseen_checked: best kernels that hold at every unseen size."""
    geomean_unseen_vs_searched: Figure = Field(default_factory=Figure)
    """Geomean over tasks of (speedup at the unseen sizes / speedup at the searched size); timed tasks that
    hold only."""
    candidates: int = 0
    repeats: int = 0
    blocked: int = 0
    repeats_per_100: float | None = None
    """Judged candidates that repeated an earlier failure of their task, per 100 candidates (goal: 0)."""
    failed_by_kind: dict[str, int] = Field(default_factory=dict)


def geomean(values: Iterable[float]) -> Figure:
    xs = [x for x in values if x is not None and x > 0]
    if not xs:
        return Figure()
    return Figure(value=math.exp(sum(math.log(x) for x in xs) / len(xs)), n=len(xs))


def _mean(values: Iterable[float]) -> Figure:
    xs = list(values)
    return Figure(value=sum(xs) / len(xs), n=len(xs)) if xs else Figure()


def fast_p_curve(
    rows: Sequence[TaskRow], key: Callable[[TaskRow], float | None], measured: bool
) -> list[float] | None:
    """Share of `rows` correct with key(row) > p, for each p of P_GRID; None when not `measured`."""
    if not measured or not rows:
        return None
    return [
        sum(1 for r in rows if r.correct and (s := key(r)) is not None and s > p) / len(rows) for p in P_GRID
    ]


def aggregate(name: str, rows: Sequence[TaskRow]) -> Aggregate:
    done = [r for r in rows if r.finished]
    correct = [r for r in done if r.correct]

    def eager(r: TaskRow) -> float | None:
        return r.speedup_vs_eager

    def comp(r: TaskRow) -> float | None:
        return r.speedup_vs_compile

    # Curves exist where timings mean something (not on CPU); vs torch.compile also needs its baseline,
    # which some tasks lack: a group whose timed tasks all lack it has no compile curve, not a zero one.
    meaningful = any(r.timing_meaningful for r in done)
    checked = [r for r in correct if r.holds_unseen is not None]
    candidates = sum(r.candidates or len(r.attempts) for r in done)
    by_kind: dict[str, int] = {}
    for r in done:
        for k, v in r.failed_by_kind.items():
            by_kind[k] = by_kind.get(k, 0) + v
    n_eager = sum(1 for r in correct if eager(r) is not None)
    n_comp = sum(1 for r in correct if comp(r) is not None)
    return Aggregate(
        name=name,
        tasks=len(done),
        total=len(rows),
        correct=len(correct),
        correct_share=len(correct) / len(done) if done else None,
        failed=sum(1 for r in done if r.status in FAILED_STATUSES),
        faster_than_eager=sum(1 for r in correct if (eager(r) or 0) > 1),
        faster_than_compile=sum(1 for r in correct if (comp(r) or 0) > 1),
        geomean_vs_eager=geomean(s for r in correct if (s := eager(r)) is not None),
        geomean_vs_compile=geomean(s for r in correct if (s := comp(r)) is not None),
        mean_fraction_of_floor=_mean(f for r in correct if (f := r.fraction_of_floor) is not None),
        fast_p=FastP(
            vs_eager=fast_p_curve(done, eager, meaningful),
            vs_compile=fast_p_curve(done, comp, meaningful and not (n_eager and not n_comp)),
            measured_eager=n_eager,
            measured_compile=n_comp,
            tasks=len(done),
        ),
        evaluations=sum(r.evaluations for r in done),
        evaluations_to_best=sum(r.evaluations_to_best or 0 for r in correct),
        wall_s=sum(r.wall_s for r in done),
        gpu_s=sum(r.gpu_s for r in done),
        unseen_checked=len(checked),
        holds_unseen=sum(1 for r in checked if r.holds_unseen),
        holds_unseen_share=sum(1 for r in checked if r.holds_unseen) / len(checked) if checked else None,
        geomean_unseen_vs_searched=geomean(
            x for r in checked if r.holds_unseen and (x := r.unseen_vs_searched) is not None
        ),
        candidates=candidates,
        repeats=sum(r.repeats for r in done),
        blocked=sum(r.blocked for r in done),
        repeats_per_100=100 * sum(r.repeats for r in done) / candidates if candidates else None,
        failed_by_kind=by_kind,
    )


def _grouped(rows: Sequence[TaskRow], key: Callable[[TaskRow], str], order: Sequence[str]) -> list[Aggregate]:
    names = list(dict.fromkeys(key(r) for r in rows))
    names.sort(key=lambda n: (order.index(n) if n in order else len(order), n))
    return [aggregate(n, [r for r in rows if key(r) == n]) for n in names]


class Suite(BaseModel):
    """suite.json."""

    schema_version: int = SCHEMA_VERSION
    bench: dict[str, Any] = Field(default_factory=dict)
    """Settings and state: out, paths, created_at, updated_at, finished (every task has a final
    outcome), tasks_total, tasks_finished, elapsed_s (wall time of the bench's sessions), workers,
    settings (model, budget, seed, device, precision, ...), timing_meaningful and timing_note."""
    overall: Aggregate
    suites: list[Aggregate] = Field(default_factory=list)
    """One aggregate per folder given."""
    families: list[Aggregate] = Field(default_factory=list)
    """One aggregate per primary op family."""
    tasks: list[TaskRow] = Field(default_factory=list)


CPU_TIMING_NOTE = (
    "timings are not meaningful here (the Triton interpreter on CPU): tasks are judged for correctness "
    "only; speedups, fast_p and the roofline fraction are not reported"
)


def build_suite(rows: Sequence[TaskRow], bench: dict[str, Any]) -> Suite:
    """The suite document for `rows` (every task of the bench, pending ones included)."""
    done = [r for r in rows if r.finished]
    meaningful = any(r.timing_meaningful for r in done)
    info = dict(bench)
    info.update(
        tasks_total=len(rows),
        tasks_finished=len(done),
        finished=all(r.status in FINAL_STATUSES for r in rows),
        timing_meaningful=meaningful,
        timing_note="" if meaningful or not done else CPU_TIMING_NOTE,
        devices=sorted({r.device_name for r in done if r.device_name}),
    )
    versions = next((r.versions for r in done if r.versions), {})
    info.setdefault("versions", versions)
    suites_order = list(dict.fromkeys(r.suite for r in rows))
    return Suite(
        bench=info,
        overall=aggregate("overall", rows),
        suites=_grouped(rows, lambda r: r.suite, suites_order),
        # a task's family is known once it has loaded: pending tasks are in no family yet
        families=_grouped(done, lambda r: r.family, FAMILY_ORDER),
        tasks=list(rows),
    )
