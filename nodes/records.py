"""Typed records the optimize graph keeps in its state and passes between nodes.

They live here (below graphs/) because the nodes build them; graphs/state.py re-exports them with the
State that holds them. Every record ignores unknown keys so that checkpoints and run directories
written by an older version still load.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelwright.hardware.result import EvalResult, Tolerance, Versions
from kernelwright.nodes.search import Action, Decision, Outcome
from kernelwright.providers.protocol import KernelHeader
from kernelwright.tasks.task import Task

Status = Literal["correct", "wrong", "failed"]


def utc_now() -> str:
    """An ISO-8601 UTC stamp to the millisecond: runs and evaluations a second apart still order."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Record(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RepresentativeDesign(Record):
    """A representative kernel shown to a large step."""

    node_id: str
    code: str
    speedup: float | None = None
    meta: str | None = None
    """The kernel's `# kernelwright:` metadata line, if it has one."""


class FailedProgram(Record):
    """A program of this run that failed, as the repeat check needs it (nodes/repeats.py)."""

    node_id: str
    key: str
    """Its syntax tree without comments and config (repeats.program_key)."""
    exact_key: str
    """The same with its config kept."""
    design: str = ""
    family: str = ""
    error_kind: str = ""
    signature: str = ""
    """The normalised error message (memory.records.error_signature)."""
    error: str = ""
    """The error's tail, to name it to the writer."""
    config_caused: bool = False
    """Another config can fix it (resources, a timeout): only the same program with the same config repeats it."""
    blocked: bool = False
    """It was not judged: a repeat stopped before the judge (it stands for the failure it repeats)."""


class ClosedDesign(Record):
    """A design closed for the task: two of its programs failed with one error kind and message."""

    design: str
    family: str = ""
    error_kind: str = ""
    signature: str = ""
    nodes: list[str] = Field(default_factory=list)
    """The failed nodes that closed it."""


class Job(Record):
    """One planned expansion and everything its branch needs from the tree (the Send payload's core)."""

    decision: Decision
    run_id: str
    parent_code: str | None = None
    """The parent kernel (None for the root, whose code is the task itself)."""
    parent_feedback: str | None = None
    """What the parent's evaluation said, as shown to the model."""
    parent_status: Status | None = None
    parent_error_kind: str | None = None
    parent_speedup: float | None = None
    parent_speedup_ci: tuple[float, float] | None = None
    """The judge's 95% interval of the parent's speedup: a step within it of its parent is a tie."""
    parent_case_id: str | None = None
    """Memory case of the parent kernel, for the lineage edge."""
    designs: list[RepresentativeDesign] = Field(default_factory=list)
    tried: list[str] = Field(default_factory=list)
    """Header lines of the programs already written in this run, oldest first (for small and large steps:
    a step should write something new)."""
    failed_programs: list[FailedProgram] = Field(default_factory=list)
    """The run's failed programs when the job was planned: a program repeating one is not judged."""
    closed_designs: list[ClosedDesign] = Field(default_factory=list)
    """Designs closed for the task when the job was planned: the prompt says so, none is judged."""

    @property
    def node_id(self) -> str:
        return self.decision.child_id

    @property
    def action(self) -> Action:
        return self.decision.action


class Prompt(Record):
    """The messages sent to the coder's chat model."""

    system: str
    user: str


class ContextItem(Record):
    """One piece of context the context manager considered (injected or cut)."""

    kind: str
    """rule, case, doc, feedback, parent, design, ..."""
    id: str = ""
    tier: str = ""
    """hot, warm or cold."""
    tokens: int = 0
    text: str = ""
    """A short form for the report (the rule text, the case summary)."""
    reason: str = ""


class ContextRecord(Record):
    """What went into a prompt and what was left out, and why."""

    tokens_used: int = 0
    budget: int = 0
    injected: list[ContextItem] = Field(default_factory=list)
    cut: list[ContextItem] = Field(default_factory=list)

    @property
    def rule_ids(self) -> list[str]:
        return [i.id for i in self.injected if i.kind == "rule" and i.id]

    @property
    def case_ids(self) -> list[str]:
        return [i.id for i in self.injected if i.kind == "case" and i.id]


class Usage(Record):
    """Chat-model calls and tokens of one step."""

    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0


class Candidate(Record):
    """What the coder produced for one node."""

    node_id: str
    code: str | None = None
    """The parsed module defining ModelNew; None when the answer held no usable program."""
    error: str | None = None
    """Why no program was taken from the answer (no code block, no ModelNew, ...)."""
    meta: str | None = None
    idea: str = ""
    """What the model said it set out to do (the first line of prose around the code), if anything."""
    answer: str = ""
    """The model's whole answer, as it came (empty in runs recorded before it was kept)."""
    answer_chars: int = 0
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
    unsupported: str | None = None
    """The writer's statement that it cannot write this task at all (an operator or dtype it has no
    design for), as it gave it; the run stops after this step (nodes/planner.py unsupported_stop)."""
    repeat_asks: int = 0
    """How often the writer was asked again because its program repeated a failure or a closed design."""
    blocked: str | None = None
    """Why the program is not judged: it still repeated a failure (or a closed design) after the asks."""
    repeat_of: str | None = None
    """The node whose failed program it repeats (for a blocked one)."""
    closed: list[str] = Field(default_factory=list)
    """Failed nodes whose program an answer repeated while the coder asked: each repeat is its failure's
    second occurrence and closes that failure's design (nodes/repeats.py)."""

    @property
    def design(self) -> str:
        """The design its `# kernelwright:` header names, else the names of its Triton kernels (a model
        need not write the header), else "-"."""
        header = KernelHeader.parse(self.meta)
        if header is not None and header.design:
            return header.design
        names = kernel_names(self.code)
        return ",".join(names) if names else "-"

    @property
    def label(self) -> str:
        """Short form of `design` for one-line displays."""
        return self.design


def kernel_names(code: str | None) -> list[str]:
    """Names of the `@triton.jit` (or autotuned) functions a program defines, in order."""
    return re.findall(r"^@triton\.(?:jit|autotune)[^\n]*\n(?:@[^\n]*\n)*def\s+(\w+)", code or "", flags=re.M)


class Timing(Record):
    """The profiler's reading of one correct candidate."""

    origin: Literal["measured", "none", "test"] = "none"
    """measured by the harness; none: not meaningful on this device; test: from the test-only seam."""
    runtime_ms: float | None = None
    runtime_p20_ms: float | None = None
    runtime_p80_ms: float | None = None
    """The 20th and 80th percentiles of the candidate's timed calls: a wide spread is a host-bound forward
    (its Python slower than its kernels) or a noisy machine."""
    eager_ms: float | None = None
    compile_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    speedup_ci: tuple[float, float] | None = None
    fraction_of_floor: float | None = None
    note: str = ""


class Reflection(Record):
    """What the reflector wrote to memory for one attempt."""

    case_id: str | None = None
    rule_ids: list[str] = Field(default_factory=list)
    """Rules created or strengthened by this attempt's failure."""
    rule_texts: list[str] = Field(default_factory=list)
    rule_source: Literal["llm", "signature", "none"] = "none"
    note: str = ""
    closed_design: str | None = None
    """The design this failure closed for the task (its second identical failure), if any."""


class Attempt(Record):
    """One finished expansion: the decision, the code, the verdict, the reward, what memory got."""

    seq: int
    node_id: str
    parent: str
    action: Action
    reason: str = ""
    candidate: Candidate
    result: EvalResult
    status: Status
    timing: Timing = Field(default_factory=Timing)
    reward: float = 0.0
    feedback: str = ""
    """The feedback text a child of this node is shown."""
    context: ContextRecord | None = None
    reflection: Reflection = Field(default_factory=Reflection)
    eval_s: float = 0.0
    finished_at: str = Field(default_factory=utc_now)

    @property
    def outcome(self) -> Outcome:
        return Outcome(
            status=self.status,
            speedup=self.timing.speedup_vs_eager if self.status == "correct" else None,
            fraction_of_floor=self.timing.fraction_of_floor if self.status == "correct" else None,
            speedup_vs_compile=self.timing.speedup_vs_compile if self.status == "correct" else None,
        )


class CostLedger(Record):
    """What a run spent. Nodes return deltas; the state's reducer adds them up."""

    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    evaluations: int = 0
    eval_s: float = 0.0
    """Seconds the evaluation workers spent on this run's candidates."""
    gpu_s: float = 0.0
    """The part of eval_s spent on a GPU (0 on a CPU run)."""
    wall_s: float = 0.0
    """Wall-clock seconds of searching, summed over the processes that ran it (time while no process
    ran, between a crash and a resume, is not counted)."""

    def __add__(self, other: CostLedger) -> CostLedger:
        return CostLedger(
            llm_calls=self.llm_calls + other.llm_calls,
            tokens_in=self.tokens_in + other.tokens_in,
            tokens_out=self.tokens_out + other.tokens_out,
            evaluations=self.evaluations + other.evaluations,
            eval_s=self.eval_s + other.eval_s,
            gpu_s=self.gpu_s + other.gpu_s,
            wall_s=self.wall_s + other.wall_s,
        )


def add_costs(left: CostLedger | None, right: CostLedger | None) -> CostLedger:
    """State reducer: sums cost deltas from parallel branches."""
    return (left or CostLedger()) + (right or CostLedger())


class RunInfo(Record):
    """Facts fixed when a run starts."""

    run_id: str
    run_dir: str
    task_name: str
    task_path: str | None = None
    input_key: str = ""
    """Which graph input started the run (see nodes.planner.input_key): another input on the same thread
    starts a new run."""
    model: str
    device: str
    """Where candidates actually run: cpu or cuda."""
    target: str
    target_display: str = ""
    target_arch: str = "cpu"
    """cuda, hip or cpu: the architecture kernels are written for (may differ from where they run)."""
    compute_capability: int | None = None
    timing_meaningful: bool = False
    timing_note: str = ""
    precision: str = "strict"
    roofline_floor_ms: float | None = None
    roofline_note: str = ""
    versions: Versions = Field(default_factory=Versions)
    seed: int = 0
    started_at: str = Field(default_factory=utc_now)


class Branch(Record):
    """The Send payload that travels context -> coder -> compiler -> profiler -> reflector for one job."""

    job: Job
    task: Task
    run: RunInfo
    prompt: Prompt | None = None
    context: ContextRecord | None = None
    candidate: Candidate | None = None
    result: EvalResult | None = None
    timing: Timing | None = None
    eval_s: float = 0.0


class BestKernel(Record):
    """The kernel a run hands back."""

    node_id: str
    code: str
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    speedup_ci: tuple[float, float] | None = None
    runtime_ms: float | None = None
    runtime_p20_ms: float | None = None
    runtime_p80_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    fraction_of_floor: float | None = None
    timing_origin: str = "none"


class OptimizeResult(Record):
    """Everything result.json holds."""

    schema_version: int = 1
    task: str
    run_id: str
    run_dir: str
    correct: bool
    """Whether the run found a verified kernel at all."""
    verdict: str
    """One plain sentence: found a faster kernel, found a correct but slower one, or found none."""
    slower_than_eager: bool | None = None
    best: BestKernel | None = None
    tolerance: Tolerance | None = None
    precision: str = "strict"
    timing_meaningful: bool = False
    timing_note: str = ""
    target: str = ""
    device: str = ""
    compute_capability: int | None = None
    versions: Versions = Field(default_factory=Versions)
    model: str = ""
    seed: int = 0
    stop_reason: str = ""
    roofline_floor_ms: float | None = None
    search: dict[str, object] = Field(default_factory=dict)
    cost: CostLedger = Field(default_factory=CostLedger)
    rules_learned: list[str] = Field(default_factory=list)
    started_at: str = ""
    finished_at: str = Field(default_factory=utc_now)
