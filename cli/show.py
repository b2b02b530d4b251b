"""`kernelwright show RUN_DIR NODE`: print one node of a run, everything the run recorded about it.

For a finished expansion: the decision (parent, action, why), the outcome, the model's whole answer, the
program taken from it, the evaluation's error and the full feedback, the rules it taught and the
context it was given. For an expansion still in flight: its decision. Read from the run's checkpoints
(the same state `--resume` continues), so it works on finished, interrupted and running runs.

Exit status 0 when the node was printed; 2 when the run directory or the node cannot be found.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kernelwright.cli.stdout_json import print_json

PROG = "kernelwright show"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "show",
        help="print one node of a run: the model's answer, the code, the error and feedback",
        description="Print what a run recorded about one node of its search tree (e.g. n3).",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (holds run.json)")
    p.add_argument("node", metavar="NODE", help="node id as the progress lines and report show it, e.g. n3")
    p.add_argument("--json", action="store_true", help="print the node's record as JSON")
    p.set_defaults(func=run)


def load_state(run_dir: str) -> dict[str, Any]:
    """The latest checkpointed state of the run in `run_dir` (ValueError with one line when there is none)."""
    from pathlib import Path

    from kernelwright.graphs.run_files import CHECKPOINT_FILE, open_checkpointer, read_run_file

    saved = read_run_file(run_dir)
    if not (Path(run_dir) / CHECKPOINT_FILE).is_file():
        raise ValueError(f"{run_dir}: the run has no checkpoints yet ({CHECKPOINT_FILE})")
    saver = open_checkpointer(run_dir)
    try:
        found = saver.get_tuple({"configurable": {"thread_id": saved.thread_id}})
    finally:
        saver.conn.close()
    if found is None:
        raise ValueError(f"{run_dir}: the run has no checkpoint yet")
    return dict(found.checkpoint.get("channel_values") or {})


def _section(title: str, body: str) -> str:
    return f"--- {title} " + "-" * max(3, 72 - len(title)) + "\n" + (body.rstrip() or "(empty)") + "\n"


def render_attempt(a: Any) -> str:
    c = a.candidate
    lines = [
        f"node {a.node_id} <- {a.parent}: {a.action} ({a.reason or 'no reason recorded'})",
        f"status {a.status}"
        + (f", {a.result.error_kind}" if a.result.error_kind else "")
        + (f", {a.timing.speedup_vs_eager:.3f}x vs eager" if a.timing.speedup_vs_eager is not None else ""),
        f"kernel {c.meta or '(no # kernelwright: header) ' + c.design}",
        f"model calls {c.usage.llm_calls}, tokens {c.usage.tokens_in} in / {c.usage.tokens_out} out, "
        f"{c.seconds:.1f} s",
    ]
    if c.idea:
        lines.append(f"idea: {c.idea}")
    if c.error:
        lines.append(f"no program taken from the answer: {c.error}")
    out = "\n".join(lines) + "\n"
    answer = c.answer or f"(not recorded by this run; {c.answer_chars} characters)"
    out += _section("model answer", answer)
    out += _section("program taken from the answer", c.code or "(none)")
    out += _section("error", a.result.error or "(none)")
    out += _section("feedback (what a child of this node is shown)", a.feedback)
    if a.reflection.rule_texts:
        out += _section("rules learned", "\n".join(a.reflection.rule_texts))
    if a.reflection.note:
        out += _section("reflection", a.reflection.note)
    if a.context is not None:
        items = [
            f"{i.kind} {i.id} ({i.tier}): {i.text[:120]}"
            for i in a.context.injected
            if i.kind in ("rule", "case")
        ]
        out += _section(
            f"rules and cases in its prompt ({a.context.tokens_used} tokens)", "\n".join(items) or "(none)"
        )
    return out


def run(args: argparse.Namespace) -> int:
    try:
        state = load_state(args.run_dir)
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    attempts = {a.node_id: a for a in state.get("attempts") or []}
    jobs = {j.node_id: j for j in state.get("jobs") or []}
    attempt = attempts.get(args.node)
    if attempt is not None:
        if args.json:
            print_json(json.dumps(attempt.model_dump(mode="json"), indent=2))
        else:
            print(render_attempt(attempt), end="")
        return 0
    job = jobs.get(args.node)
    if job is not None:
        if args.json:
            print_json(json.dumps(job.model_dump(mode="json"), indent=2))
        else:
            d = job.decision
            print(f"node {job.node_id} <- {d.parent}: {d.action} ({d.reason}); in flight, not finished yet")
        return 0
    known = ", ".join(sorted(jobs, key=lambda n: (len(n), n))) or "none yet"
    print(f"{PROG}: {args.run_dir} has no node {args.node!r} (nodes: {known})", file=sys.stderr)
    return 2
