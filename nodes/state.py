"""The optimize graph's state: what is checkpointed after every step.

It lives below the node modules (with the runtime Context, nodes/run_context.py) so that the nodes and
graphs/ share it without nodes/ importing graphs/.

The search tree itself is not stored: it is rebuilt from `jobs` (the decisions, in order) and
`attempts` (their outcomes) whenever the planner runs, so both lists are append-only and parallel
branches can add to them without conflict. Records are pydantic models (nodes/records.py).
"""

from __future__ import annotations

import operator
from typing import Annotated

from typing_extensions import TypedDict

from kernelwright.hardware.result import EvalResult, Tolerance, Versions
from kernelwright.nodes.records import (
    Attempt,
    BestKernel,
    Branch,
    Candidate,
    ClosedDesign,
    ContextItem,
    ContextRecord,
    CostLedger,
    FailedProgram,
    Job,
    OptimizeResult,
    Prompt,
    Reflection,
    RepresentativeDesign,
    RunInfo,
    Timing,
    Usage,
    add_costs,
)
from kernelwright.nodes.search import Decision, Outcome, TreeNode
from kernelwright.tasks.task import Task, TaskSignature

SearchNode = TreeNode
"""A node of the search tree (nodes/search.py)."""


class InputState(TypedDict, total=False):
    """What a caller gives the graph: a task file path, or a task's source and a name for it.

    The planner clears these keys when it starts a run (the run keeps what they named); input given to
    the thread later starts a new run (nodes/planner.py)."""

    task_path: str | None
    """Path of a KernelBench-format task file."""
    task_source: str | None
    """The task's source text (instead of task_path)."""
    task_name: str | None
    """Name for a task given as source (default "task")."""


class State(InputState, total=False):
    """The full state of one optimize run."""

    run: RunInfo
    """Facts fixed at the start: run id and directory, target, device, timing policy, roofline floor."""
    task: Task
    """The loaded reference program."""
    jobs: Annotated[list[Job], operator.add]
    """Every expansion the planner issued, in order (pending ones included)."""
    attempts: Annotated[list[Attempt], operator.add]
    """Every finished expansion, in the order the reflector recorded them."""
    cost: Annotated[CostLedger, add_costs]
    """Running totals: LLM calls and tokens, evaluation and GPU seconds, wall time."""
    stop_reason: str
    """Why the planner stopped issuing expansions."""
    result: OptimizeResult | None
    """The final result (what result.json holds), set by finalize; None while a run is in progress."""


# Types the checkpointer may revive from msgpack (an explicit allowlist instead of "anything").
CHECKPOINT_TYPES: tuple[type, ...] = (
    Attempt,
    BestKernel,
    Branch,
    Candidate,
    ClosedDesign,
    ContextItem,
    ContextRecord,
    CostLedger,
    Decision,
    FailedProgram,
    RepresentativeDesign,
    EvalResult,
    Job,
    OptimizeResult,
    Outcome,
    Prompt,
    Reflection,
    RunInfo,
    Task,
    TaskSignature,
    Timing,
    Tolerance,
    Usage,
    Versions,
)

__all__ = [
    "CHECKPOINT_TYPES",
    "Attempt",
    "BestKernel",
    "Branch",
    "Candidate",
    "ContextItem",
    "ContextRecord",
    "CostLedger",
    "Decision",
    "RepresentativeDesign",
    "InputState",
    "Job",
    "OptimizeResult",
    "Outcome",
    "Prompt",
    "Reflection",
    "RunInfo",
    "SearchNode",
    "State",
    "Timing",
    "Usage",
]
