"""Every program the offline writer emits for a fixed set of prompts, hashed: a refactor's safety net.

A change to the writer's structure (not its output) must leave every program byte-identical. This tool
writes, for each bundled task (level1, level2, published) and 30 generated ones (seed 0):
  - the large step, then two small steps from it (the first with the large step as parent and tried,
    the second with both tried), each once without and once with the H200's <target> section;
  - each program of the task's design grid (providers/offline/choice/variants.design_grid), fp32 and tf32.
A writer that raises is recorded as `error: <type>: <message>`, so errors compare too.
At 114 tasks that is 3,473 programs (2026-12-05); a run takes about a minute and a half on one core.

Usage, from the repository root:
    python -m tests.tools.program_grid --out DIR          # DIR/programs/*.py and DIR/manifest.json
    python -m tests.tools.program_grid --out NEW --compare OLD/manifest.json   # lists what differs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

from kernelwright.hardware.targets import get_target
from kernelwright.nodes.context_builder import target_facts
from kernelwright.providers.offline.choice.variants import design_grid, program_variant
from kernelwright.providers.offline.writer import write_program
from kernelwright.tasks.generate import generate_tasks
from tests.fakes.writer import loop_variables_reassigned, writer_prompt

ROOT = Path(__file__).resolve().parents[2]


def _tasks() -> list[tuple[str, str]]:
    out = []
    for suite in ("level1", "level2", "published"):
        for p in sorted((ROOT / "tasks" / suite).glob("*.py")):
            if not p.name.startswith("_"):
                out.append((f"{suite}/{p.stem}", p.read_text()))
    out += [(f"generated/{g.name}", g.source) for g in generate_tasks(30, seed=0)]
    return out


def _header(code: str) -> str:
    return code.splitlines()[0] if code else ""


def _programs(name: str, source: str) -> dict[str, str]:
    """label -> program text (or `error: ...`)."""
    out: dict[str, str] = {}
    facts = target_facts(get_target("h200"))[0]
    stem = name.replace("/", "_")

    def record(label: str, fn: Callable[[], str | None]) -> str:
        try:
            code = fn()
        except Exception as e:  # noqa: BLE001 - the error is part of the snapshot
            code = f"error: {type(e).__name__}: {str(e)[:300]}"
        out[label] = code or "no program"
        return code or ""

    def write(prompt: str) -> Callable[[], str | None]:
        return lambda: write_program(prompt).code

    for tag, extra in (("plain", {}), ("h200", {"target": facts})):
        large = record(f"{tag}-large", write(writer_prompt(source, **extra)))
        if not large.startswith("# kernelwright:"):
            continue
        s1 = record(
            f"{tag}-small1",
            write(writer_prompt(source, "small_step", **extra, parent=large, tried=_header(large))),
        )
        tried = "\n".join(h for h in (_header(large), _header(s1)) if h)
        record(
            f"{tag}-small2",
            write(writer_prompt(source, "small_step", **extra, parent=s1 or large, tried=tried)),
        )
    for tf32 in (False, True):
        try:
            grid = design_grid(source, stem, tf32=tf32)
        except Exception as e:  # noqa: BLE001
            out[f"grid-tf32={tf32}"] = f"error: {type(e).__name__}: {str(e)[:300]}"
            continue
        for i, v in enumerate(grid):
            record(
                f"grid-tf32={tf32}-{i}-{v.label()}",
                partial(
                    lambda v, t: program_variant(source, stem, v.design, v.config, tf32=t, fuse=v.fuse).code,
                    v,
                    tf32,
                ),
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--compare", type=Path, help="an earlier manifest.json: list the programs that differ")
    args = ap.parse_args(argv)
    # The writer imported is the one the import system finds, which an editable install pins to its own
    # checkout: run from another tree (a git worktree of an older commit), this tool would write the
    # installed checkout's programs and a "before" grid would equal the "after" one. Say which, and refuse
    # a mismatch with the tree these tests are in. (kernelwright.IMPORT_ROOT would not tell: there the top
    # package comes from the current folder while its subpackages come through the editable finder.)
    writer_root = Path(write_program.__code__.co_filename).resolve().parents[2]
    here = Path(__file__).resolve().parents[2]
    print(f"writer: {writer_root}")
    if writer_root != here:
        print(f"the writer imported is {writer_root}'s, not this tree's ({here}): its programs would not be this "
              "tree's; run from that checkout, or install this one (pip install -e .)", file=sys.stderr)  # fmt: skip
        return 2
    (args.out / "programs").mkdir(parents=True, exist_ok=True)
    manifest: dict[str, str] = {}
    shadowed: list[str] = []
    for name, source in _tasks():
        for label, code in _programs(name, source).items():
            key = f"{name}::{label}"
            manifest[key] = hashlib.sha256(code.encode()).hexdigest()[:16]
            safe = key.replace("/", "__").replace("::", "--").replace(" ", "_")[:180]
            (args.out / "programs" / f"{safe}.py").write_text(code)
            if not code.startswith("error:"):
                shadowed += [f"{key}: {w}" for w in loop_variables_reassigned(code)]
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"{len(manifest)} programs from {len({k.split('::')[0] for k in manifest})} tasks -> {args.out}")
    for line in shadowed:
        print(f"loop assigns its own variable: {line}")
    if shadowed:
        print(
            f"{len(shadowed)} loops assign their own variable (tests/fakes/writer.loop_variables_reassigned)"
        )
    if args.compare:
        old = json.loads(args.compare.read_text())
        diff = sorted(k for k in set(old) | set(manifest) if old.get(k) != manifest.get(k))
        for k in diff:
            print(f"differs: {k} ({old.get(k, 'absent')} -> {manifest.get(k, 'absent')})")
        print(f"{len(diff)} of {len(set(old) | set(manifest))} differ")
        return 1 if diff or shadowed else 0
    return 1 if shadowed else 0


if __name__ == "__main__":
    sys.exit(main())
