"""Prompt tokens per candidate: the tiered context manager against pasting every rule and case.

    python benchmarks/context_tokens.py --memory DIR [--budget 6000] [--hardware nvidia-h200] [--out FILE]

For every bundled level1/level2 task and each request kind (large step, repair after a mismatch), the
coder's prompt is built twice from the same memory: by the context manager (nodes/context_builder.py:
hot tier always, then designs, relevant rules and the nearest cases, under the token budget), and as the
naive alternative, the same hot tier followed by every rule and every case of the memory in full, as the
context manager renders them. Tokens are counted with the context manager's own counter (tiktoken when
its encoding is cached, else the documented estimate; the counter's name is printed). Prints a table and
writes the numbers as JSON with --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernelwright.hardware.result import Versions  # noqa: E402
from kernelwright.memory import open_memory  # noqa: E402
from kernelwright.nodes.context_builder import build_context  # noqa: E402
from kernelwright.nodes.prompts import case_text, tagged  # noqa: E402
from kernelwright.nodes.tokens import TokenCounter  # noqa: E402
from kernelwright.tasks import bundled_suite_dir, load_task  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memory", required=True, help="a memory folder (e.g. one a bench filled)")
    ap.add_argument("--budget", type=int, default=6000, help="the context manager's token budget")
    ap.add_argument("--hardware", default="nvidia-h200")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()
    memory = open_memory(args.memory)
    counter = TokenCounter()
    versions = Versions(torch="2.11.0", triton="3.6.0")
    every_rule = "\n".join(f"- {r.text}" for r in memory.rules.all(min_count=1))
    every_case = "\n".join(
        tagged("case", case_text(c, 10**9, False), id=c.id, outcome=c.outcome)
        for c in memory.cases.iter_all()
    )
    pasted_tail = f"<rules>\n{every_rule}\n</rules>\n<experience>\n{every_case}\n</experience>\n"
    rows = []
    for level in ("level1", "level2"):
        for path in sorted(bundled_suite_dir(level).glob("[0-9]*.py")):
            task = load_task(path)
            for kind, feedback in (("large_step", None), ("repair", "mismatch: 12 of 4096 elements differ")):
                common = dict(hardware=args.hardware, versions=versions, feedback=feedback,
                              error_kind="mismatch" if feedback else None, parent_code=None)  # fmt: skip
                tiered = build_context(
                    task, kind, memory=memory, budget=args.budget, counter=counter, **common
                )
                hot = build_context(task, kind, memory=None, budget=args.budget, counter=counter, **common)
                cases = sum(1 for i in tiered.injected if i.kind == "case")
                rules = sum(1 for i in tiered.injected if i.kind == "rule")
                pasted = counter(hot.prompt + pasted_tail)
                rows.append({"task": f"{level}/{task.name}", "kind": kind, "tiered": tiered.tokens_used,
                             "hot_only": hot.tokens_used, "pasted": pasted, "cases": cases, "rules": rules})  # fmt: skip
    tiered = statistics.mean(r["tiered"] for r in rows)
    pasted = statistics.mean(r["pasted"] for r in rows)
    hot = statistics.mean(r["hot_only"] for r in rows)
    summary = {
        "counter": counter.name,
        "memory": {"cases": memory.cases.count(), "rules": len(memory.rules.all(min_count=1))},
        "prompts": len(rows),
        "mean_tokens": {"tiered": tiered, "pasted": pasted, "hot_only": hot},
        "tiered_over_pasted": tiered / pasted,
        "mean_cases_injected": statistics.mean(r["cases"] for r in rows),
        "budget": args.budget,
    }
    print(json.dumps(summary, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    memory.close()


if __name__ == "__main__":
    main()
