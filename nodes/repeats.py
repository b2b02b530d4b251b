"""No failure repeated: which programs of a run already failed, which designs are closed, and whether a
new program only repeats one of them.

A program's *key* is its syntax tree without comments, docstrings and its configuration: the values of
launch settings (num_warps, num_stages, ...), of UPPER_CASE keyword arguments and constants (BLOCK=1024,
BLOCK_M = 64) and the defaults of `tl.constexpr` parameters are masked. Two programs with one key are the
same program up to their config. A failure is identified by its error kind and normalised message
(memory.records.error_signature).

- A new program whose key equals that of a program that already failed on this task is a repeat: it is
  not judged (the coder asks the writer again with the failure named, a bounded number of times, and
  else hands it on as blocked). A failure the config causes (out of resources, shared memory, registers,
  a timeout) is the exception: there a program is a repeat only when it is the same up to comments, since
  another block size or stage count is a real repair.
- A copy of a program another branch of the run is still judging (k expansions in flight: the copy's job
  was planned before the first copy's verdict) waits for that verdict at the judge (`judge_once`) and,
  when the first copy failed and the copy repeats it, is blocked as above: one program, one judging.
- A blocked program costs the writer's calls but no candidate: it does not count against the candidate
  budget; as many blocked answers as the budget stop the search (`repeats_stop`).
- Two failures of one design (its `# kernelwright:` header's design) with the same error kind and message
  close that design for the task: every later prompt says so (a rule line the offline writer and an LLM
  both read), a program of a closed design is not judged, and the reflector learns a rule from it.

Pure functions over the run's attempts, which the planner snapshots into each job (nodes/records.Job),
and the one process-wide record of the programs being judged that `judge_once` keeps per run.
"""

from __future__ import annotations

import ast
import hashlib
import re
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from kernelwright.memory.records import error_signature
from kernelwright.nodes.records import Branch, ClosedDesign, FailedProgram
from kernelwright.providers.protocol import KernelHeader
from kernelwright.tasks.pyast import parse_python

if TYPE_CHECKING:
    from kernelwright.hardware.result import EvalResult
    from kernelwright.nodes.records import Attempt

LAUNCH_KEYWORDS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "waves_per_eu"})
_UPPER = re.compile(r"[A-Z][A-Z0-9_]*")
_CONFIG_CAUSED = ("out of resources", "outofresources", "shared memory", "registers", "too many resources")
BLOCKED = "blocked"
"""EvalResult.extra key on a program that was not judged: why (the repeat it is, or its closed design)."""
REPEAT_OF = "repeat_of"
"""EvalResult.extra key: the node whose failed program this one repeats."""
CLOSING_REPEATS = 2
"""Identical failures of one design that close it for the task."""


class _Mask(ast.NodeTransformer):
    """Replaces config values with one placeholder name."""

    placeholder = ast.Name(id="_CONFIG_", ctx=ast.Load())

    def _const(self, node: ast.expr | None) -> bool:
        """A number (block sizes, warps, stages); strings stay (a precision such as "ieee" is a design
        choice that can fix a mismatch)."""
        if isinstance(node, ast.UnaryOp):
            node = node.operand
        return isinstance(node, ast.Constant) and type(node.value) in (int, float, bool)

    def visit_keyword(self, node: ast.keyword) -> ast.keyword:
        self.generic_visit(node)
        if (
            node.arg
            and (node.arg in LAUNCH_KEYWORDS or _UPPER.fullmatch(node.arg))
            and self._const(node.value)
        ):
            node.value = self.placeholder
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.Assign:
        self.generic_visit(node)
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if names and all(_UPPER.fullmatch(n) for n in names) and self._const(node.value):
            node.value = self.placeholder
        return node

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name == "Config":  # triton.Config({"BLOCK": 128}, num_warps=4): every value is config
            for arg in node.args:
                if isinstance(arg, ast.Dict):
                    arg.values = [self.placeholder if self._const(v) else v for v in arg.values]  # type: ignore[misc]
        return node

    def _strip_docstring(self, body: list[ast.stmt]) -> list[ast.stmt]:
        first = body[0] if body else None
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            return body[1:] or [ast.Pass()]
        return body

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        self.generic_visit(node)
        node.body = self._strip_docstring(node.body)
        args = node.args
        # defaults line up with the last positional parameters; a tl.constexpr parameter's default is config
        params = args.posonlyargs + args.args
        for param, i in zip(
            params[len(params) - len(args.defaults) :], range(len(args.defaults)), strict=True
        ):
            if "constexpr" in ast.unparse(param.annotation or ast.Constant(None)) and self._const(
                args.defaults[i]
            ):
                args.defaults[i] = self.placeholder
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        self.generic_visit(node)
        node.body = self._strip_docstring(node.body)
        return node


def program_key(code: str | None, *, config: bool = False) -> str | None:
    """The program's key: a digest of its syntax tree without comments and docstrings and, unless
    `config`, with its config values masked. None without a program; a program that does not parse is
    keyed by its text with blank lines and trailing spaces dropped."""
    if code is None:
        return None
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        text = "\n".join(line.rstrip() for line in code.splitlines() if line.strip())
        return "text:" + hashlib.sha256(text.encode()).hexdigest()[:32]
    tree.body = _Mask()._strip_docstring(tree.body) if not config else tree.body
    if not config:
        tree = _Mask().visit(tree)
    return "ast:" + hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:32]


def config_caused(error_kind: str | None, error: str | None) -> bool:
    """A failure another config can fix: the compiler's resource limits, or a timeout."""
    low = (error or "").lower()
    return error_kind == "timeout" or any(w in low for w in _CONFIG_CAUSED)


def header_design(code: str | None) -> tuple[str, str]:
    """(design, family) its `# kernelwright:` header names, ("", "") without one."""
    header = KernelHeader.parse(code)
    return (header.design, header.family) if header is not None else ("", "")


def failed_program(a: Attempt) -> FailedProgram | None:
    """What the run remembers of a failed attempt (None for a correct one, or one without a program)."""
    return failed_of(a.node_id, a.status, a.candidate.code, a.result)


def failed_of(node_id: str, status: str, code: str | None, result: EvalResult) -> FailedProgram | None:
    """`failed_program` from an attempt's parts (the reflector has them before the attempt exists)."""
    if status == "correct" or code is None:
        return None
    design, family = header_design(code)
    extra = result.extra or {}
    if extra.get(REPEAT_OF):  # a blocked repeat stands for the failure it repeats
        kind, signature = str(extra.get("repeat_error_kind") or ""), str(extra.get("repeat_signature") or "")
        error = str(extra.get("repeat_error") or "")
    else:
        kind, signature, error = (
            result.error_kind or "",
            error_signature(result.error_kind, result.error),
            result.error or "",
        )
    return FailedProgram(
        node_id=node_id,
        key=program_key(code) or "",
        exact_key=program_key(code, config=True) or "",
        design=design,
        family=family,
        error_kind=kind,
        signature=signature,
        error=error[-1500:],
        config_caused=config_caused(kind, error),
        blocked=bool(extra.get(BLOCKED)),
    )


def failure_memory(attempts: Iterable[Attempt]) -> tuple[list[FailedProgram], list[ClosedDesign]]:
    """The run's failed programs (oldest first) and the designs two identical failures closed (a
    repeat the coder caught and asked again about counts as one: `Candidate.closed`)."""
    ordered = sorted(attempts, key=lambda a: a.seq)
    failed = [f for a in ordered if (f := failed_program(a)) is not None]
    closed = closed_designs(failed)
    by_node = {f.node_id: f for f in failed}
    for a in ordered:
        for nid in a.candidate.closed:
            f = by_node.get(nid)
            if f is not None and f.design and all(c.design != f.design for c in closed):
                closed.append(ClosedDesign(design=f.design, family=f.family, error_kind=f.error_kind,
                                           signature=f.signature, nodes=[nid, a.node_id]))  # fmt: skip
    return failed, closed


def closed_designs(failed: Iterable[FailedProgram]) -> list[ClosedDesign]:
    """Designs with at least CLOSING_REPEATS failures of one error kind and message, in closing order."""
    groups: dict[tuple[str, str, str], list[FailedProgram]] = defaultdict(list)
    closed: dict[str, ClosedDesign] = {}
    for f in failed:
        if not f.design or f.design in closed:
            continue
        group = groups[(f.design, f.error_kind, f.signature)]
        group.append(f)
        if len(group) >= CLOSING_REPEATS:
            closed[f.design] = ClosedDesign(
                design=f.design,
                family=f.family,
                error_kind=f.error_kind,
                signature=f.signature,
                nodes=[g.node_id for g in group],
            )
    return list(closed.values())


def closes_design(
    failed: FailedProgram, earlier: list[FailedProgram], closed: list[ClosedDesign]
) -> ClosedDesign | None:
    """The design this failure closes: its design's second failure of one error kind and message (a
    blocked repeat stands for the failure it repeats), when the design is not closed already."""
    if not failed.design or any(c.design == failed.design for c in closed):
        return None
    got = closed_designs([*earlier, failed])
    return next((c for c in got if c.design == failed.design and failed.node_id in c.nodes), None)


REPEATS_STOP = "the writer only repeated failures"
"""The start of the stop reason when blocked repeats reached the candidate budget."""


def repeats_stop(attempts: Iterable[Attempt], budget: int) -> str | None:
    """Why the search stops: as many answers were blocked as the run may judge candidates. A blocked
    answer does not count against the candidate budget (nothing was judged), so this bounds a writer
    that keeps repeating; None to go on."""
    blocked = [a.node_id for a in attempts if a.candidate.blocked]
    if budget <= 0 or len(blocked) < budget:
        return None
    return f"{REPEATS_STOP} ({len(blocked)} answers not judged: {', '.join(blocked[:5])}{' ...' if len(blocked) > 5 else ''})"


def repeated(code: str | None, failed: Iterable[FailedProgram]) -> tuple[FailedProgram, bool] | None:
    """(the failed program `code` repeats, whether only its config differs), or None."""
    if code is None:
        return None
    key, exact = program_key(code), program_key(code, config=True)
    for f in failed:
        if f.exact_key == exact:
            return f, False
        if not f.config_caused and f.key == key:
            return f, True
    return None


class _Judged:
    """A program of a run this process is judging or has judged (the no-repeat guard across branches)."""

    def __init__(self, node_id: str, key: str | None, exact_key: str | None) -> None:
        self.node_id, self.key, self.exact_key = node_id, key, exact_key
        self.done = threading.Event()
        self.failed: FailedProgram | None = None


_judged: OrderedDict[tuple[str, str], list[_Judged]] = OrderedDict()
_judged_lock = threading.Lock()
KEPT_RUNS = 64
"""Runs whose judged programs this process remembers (the oldest is forgotten first)."""


def judge_once(
    run_id: str, run_dir: str, node_id: str, code: str, judge: Callable[[], EvalResult]
) -> EvalResult | FailedProgram:
    """Judge a program unless it repeats one another branch of the run is judging or has judged.

    The coder checks a program against the failures its job was planned with; a copy of a program that
    was still being judged in another branch then (k expansions in flight) is not among them. Here the
    second copy waits for the first one's verdict: when the first failed and the copy repeats it (the same
    program, or the same up to its config unless another config can fix the failure) it is not judged and
    the failed program it repeats comes back; otherwise it is judged and its result comes back. An identical copy
    of a correct program then reuses the logged verdict (nodes/compiler.evaluate_logged)."""
    key, exact = program_key(code), program_key(code, config=True)
    run = (run_id, run_dir)
    while True:
        with _judged_lock:
            programs = _judged.setdefault(run, [])
            _judged.move_to_end(run)
            while len(_judged) > KEPT_RUNS:
                _judged.popitem(last=False)
            same = [j for j in programs if j.node_id != node_id and (j.exact_key == exact or j.key == key)]
            pending = next((j for j in same if not j.done.is_set()), None)
            if pending is None:
                for j in same:
                    f = j.failed
                    if f is not None and (j.exact_key == exact or not f.config_caused):
                        return f
                mine = _Judged(node_id, key, exact)
                programs.append(mine)
                break
        pending.done.wait()  # the first copy's judge has its own timeout; it always ends
    try:
        result = judge()
        mine.failed = failed_of(node_id, "correct" if result.correct else "failed", code, result)
        return result
    finally:
        mine.done.set()


def blocked_in_flight(branch: Branch, first: FailedProgram) -> Branch:
    """The branch of a program `judge_once` did not judge: blocked as a repeat of `first`, which its job
    (planned while `first` was being judged) now names among the run's failures."""
    assert branch.candidate is not None
    why = f"not judged: the same program as {first.node_id}, which another branch was judging, failed"
    job = branch.job.model_copy(update={"failed_programs": [*branch.job.failed_programs, first]})
    candidate = branch.candidate.model_copy(update={"blocked": why, "repeat_of": first.node_id})
    return branch.model_copy(update={"job": job, "candidate": candidate})


def blocked_result_extra(f: FailedProgram, how: str) -> dict[str, object]:
    """The extra fields of a blocked repeat's result: which failure it repeats, for later counting."""
    return {
        BLOCKED: how,
        REPEAT_OF: f.node_id,
        "repeat_error_kind": f.error_kind,
        "repeat_signature": f.signature,
        "repeat_error": f.error,
    }


def _failures(attempts: Iterable[Attempt]) -> Iterator[tuple[Attempt, FailedProgram | None, str]]:
    """Each failed attempt in planning order with its failed program and how it counts: "blocked" (a
    repeat stopped before the judge), "repeat" (judged although it repeated an earlier judged failure: the
    same program up to config, the same error kind and message) or "failed". A blocked copy planned before
    the failure it repeats (two branches in flight) does not make that failure a repeat."""
    seen: list[FailedProgram] = []
    for a in sorted(attempts, key=lambda a: a.seq):
        if a.status == "correct":
            continue
        f = failed_program(a)
        if f is not None and f.blocked:  # no verdict of its own: a later judged copy repeats what it repeated
            yield a, f, "blocked"
            continue
        if f is None:
            yield a, None, "failed"
            continue
        same = [s for s in seen if s.exact_key == f.exact_key or (not f.config_caused and s.key == f.key)]
        repeat = any(s.error_kind == f.error_kind and s.signature == f.signature for s in same)
        seen.append(f)
        yield a, f, "repeat" if repeat else "failed"


def failure_counts(attempts: Iterable[Attempt]) -> dict[str, object]:
    """Per run: failed candidates by error kind, how many were judged although they repeated an earlier
    failure (same program up to config, same error kind and message), how many repeats were stopped
    before the judge, and the designs closed. What result.json's search summary and the bench report
    show; the goal is zero judged repeats."""
    attempts = list(attempts)
    by_kind: dict[str, int] = {}
    repeats = blocked = 0
    seen: list[FailedProgram] = []
    for a, f, how in _failures(attempts):
        if f is not None:
            seen.append(f)
        if how == "blocked":
            blocked += 1
            continue
        kind = a.result.error_kind or "unknown"
        by_kind[kind] = by_kind.get(kind, 0) + 1
        repeats += how == "repeat"
    return {
        "candidates": len(attempts),
        "failed_by_kind": by_kind,
        "repeats": repeats,
        "blocked": blocked,
        "closed_designs": [c.design for c in closed_designs(seen)],
    }


class FailureRow(BaseModel):
    """Failed attempts of one design with one error kind (report.html's failure table)."""

    design: str
    """The design its `# kernelwright:` header names ("" without a header or program)."""
    family: str = ""
    error_kind: str
    """The judge's error kind; for a blocked repeat, the kind of the failure it repeats ("closed design"
    for a program blocked because its design was closed)."""
    failed: int = 0
    """Judged and failed (repeats included)."""
    repeats: int = 0
    """Of `failed`, judged although they repeated an earlier failure (the goal is 0)."""
    blocked: int = 0
    """Repeats stopped before the judge (no candidate spent)."""
    nodes: list[str] = Field(default_factory=list)


def failures_by_design(attempts: Iterable[Attempt]) -> list[FailureRow]:
    """The run's failed attempts counted per design and error kind, most failures first."""
    rows: dict[tuple[str, str], FailureRow] = {}
    for a, f, how in _failures(attempts):
        design, family = (f.design, f.family) if f is not None else header_design(a.candidate.code)
        if how == "blocked":
            kind = (f.error_kind if f is not None else "") or "closed design"
        else:
            kind = a.result.error_kind or "unknown"
        row = rows.setdefault((design, kind), FailureRow(design=design, family=family, error_kind=kind))
        if how == "blocked":
            row.blocked += 1
        else:
            row.failed += 1
            row.repeats += how == "repeat"
        row.nodes.append(a.node_id)
    return sorted(rows.values(), key=lambda r: (-(r.failed + r.blocked), r.design, r.error_kind))
