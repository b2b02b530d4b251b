"""`kernelwright memory stats|rules|export FILE|import FILE|prune|relabel|forget ID...`: look after the memory
store.

Every subcommand takes `--memory DIR_OR_URL` (default $KERNELWRIGHT_MEMORY, else ~/.kernelwright) and
`--json` for machine-readable output. Exit status 0 on success, 1 when the memory cannot be used or
an import file is invalid (the one-line reason goes to stderr), 2 for usage errors.

A memory folder this process cannot write is read from a snapshot (stats, rules and export work; import,
prune, relabel and forget say it is read-only). A damaged folder is named as such with what can be recovered; `export`
then writes every record SQLite can still read (memory/damage.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelwright.memory import Memory


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "memory",
        help="inspect, export, import, prune and correct the learned memory (cases and rules)",
        description="Inspect and maintain the memory kernelwright learns into.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--memory", default=None, metavar="DIR_OR_URL", help="memory folder or Chroma server URL"
    )
    common.add_argument("--json", action="store_true", help="print JSON")
    sub = parser.add_subparsers(dest="memory_command", metavar="ACTION", required=True)

    p = sub.add_parser("stats", parents=[common], help="counts of cases, rules and outcomes")
    p.set_defaults(func=_stats)

    p = sub.add_parser("rules", parents=[common], help="list rules with counts and effect")
    p.add_argument(
        "--all", action="store_true", help="include rules under the injection threshold (and not certain)"
    )
    p.add_argument("--limit", type=int, default=50, help="most rules to list (default 50; 0 = all)")
    p.set_defaults(func=_rules)

    p = sub.add_parser("export", parents=[common], help="write all records to a JSONL file")
    p.add_argument("file")
    p.set_defaults(func=_export)

    p = sub.add_parser("import", parents=[common], help="read records from a JSONL export (validated first)")
    p.add_argument("file")
    p.set_defaults(func=_import)

    p = sub.add_parser(
        "prune", parents=[common], help="drop rules that do not help or whose toolchain is gone"
    )
    p.add_argument("--min-samples", type=int, default=20, help="attempts needed with and without a rule (20)")
    p.add_argument("--dry-run", action="store_true", help="report what would be dropped, drop nothing")
    p.add_argument(
        "--keep-toolchain",
        action="store_true",
        help="do not drop rules seen only with another Triton version",
    )
    p.set_defaults(func=_prune)

    p = sub.add_parser(
        "relabel",
        parents=[common],
        help="label every case again by today's outcome labels (a memory from before ties were labelled)",
    )
    p.add_argument("--dry-run", action="store_true", help="report what would change, change nothing")
    p.set_defaults(func=_relabel)

    p = sub.add_parser(
        "forget",
        parents=[common],
        help="delete rules or cases by id (`rules --all --json` shows rule ids, `export FILE` case ids): a "
        "rule learned from a fault that was not the kernel's, a case judged wrongly",
    )
    p.add_argument("ids", nargs="+", metavar="ID", help="rule ids (rule-...) and case ids (case-...)")
    p.set_defaults(func=_forget)


def _open(args: argparse.Namespace) -> Memory:
    from kernelwright.memory import open_memory

    return open_memory(args.memory)


def _run(args: argparse.Namespace, body: Any, on_damaged: Any = None, on_missing: Any = None) -> int:
    """`body(memory)`'s exit status; `on_missing(folder)`'s for a folder that does not exist, when given
    (reading commands: opening would make the folder, and reading makes nothing)."""
    from kernelwright.memory import MemoryDamagedError, MemoryImportError, MemoryLocationError
    from kernelwright.memory.core import missing_folder

    try:
        missing = missing_folder(args.memory) if on_missing is not None else None
        if missing is not None:
            return int(on_missing(missing))
        mem = _open(args)
    except MemoryDamagedError as exc:
        if on_damaged is not None:
            return int(on_damaged(exc))
        print(f"kernelwright memory: {exc}", file=sys.stderr)
        return 1
    except (MemoryLocationError, ValueError) as exc:
        print(f"kernelwright memory: {exc}", file=sys.stderr)
        return 1
    try:
        return int(body(mem))
    except MemoryDamagedError as exc:
        if on_damaged is not None:
            return int(on_damaged(exc))
        print(f"kernelwright memory: {exc}", file=sys.stderr)
        return 1
    except (MemoryImportError, MemoryLocationError) as exc:
        print(f"kernelwright memory: {exc}", file=sys.stderr)
        return 1
    finally:
        mem.close()


def _nothing_to(verb: str) -> Any:
    def answer(folder: str) -> int:
        print(f"kernelwright memory: no memory at {folder} (the folder does not exist); nothing to {verb}",
              file=sys.stderr)  # fmt: skip
        return 1

    return answer


def _print_json(data: Any) -> None:
    from kernelwright.cli.stdout_json import print_json

    print_json(json.dumps(data, indent=2, sort_keys=True))


def _stats(args: argparse.Namespace) -> int:
    def body(mem: Memory) -> int:
        st = mem.stats()
        if args.json:
            _print_json(st.model_dump())
            return 0
        print(f"memory     {st.location}  (embedding {st.embedding})")
        print(f"cases      {st.cases}")
        for outcome, n in st.outcomes.items():
            print(f"  {outcome:<12} {n}")
        print(
            f"rules      {st.rules}  ({st.rules_injectable} offered: at or over the threshold {st.rule_threshold},"
            " or certain)"
        )
        print(f"exposures  {st.exposures}")
        return 0

    def missing(folder: str) -> int:
        from kernelwright.memory.core import empty_stats

        if args.json:
            _print_json(empty_stats(folder).model_dump())
        else:
            print(
                f"memory     {folder}  does not exist yet: nothing learned (the first optimize run makes it)"
            )
        return 0

    return _run(args, body, on_missing=missing)


def _rules(args: argparse.Namespace) -> int:
    def body(mem: Memory) -> int:
        rules = mem.rules.all(min_count=0 if args.all else mem.rules.threshold)
        if args.limit > 0:
            rules = rules[: args.limit]
        effects = mem.rules.effects(rules)
        if args.json:
            out = []
            for r in rules:
                eff = effects[r.id]
                out.append(
                    {
                        **r.model_dump(mode="json"),
                        "certain": r.certain,
                        "effect": {
                            **eff.model_dump(),
                            "rate_with": eff.rate_with,
                            "rate_without": eff.rate_without,
                        },
                    }
                )
            _print_json(out)
            return 0
        if not rules:
            print(
                "no rules"
                + ("" if args.all else f" at or over the threshold {mem.rules.threshold} (try --all)")
            )
            return 0
        for r in rules:
            eff = effects[r.id]
            rate = (
                f"fail {eff.rate_with:.0%} with ({eff.with_attempts}) vs {eff.rate_without:.0%} without "
                f"({eff.without_attempts})"
                if eff.rate_with is not None and eff.rate_without is not None
                else f"exposed {eff.with_attempts}x"
            )
            last = time.strftime("%Y-%m-%d", time.localtime(r.last_seen))
            seen = ", ".join(filter(None, [*r.hardware, *(f"triton {v}" for v in r.triton_versions)]))
            print(f"{r.count:>4}  {r.text}")
            certain = (
                "  certain (a compiler's resource report: offered from its first sighting)"
                if r.certain
                else ""
            )
            print(
                f"      {r.id}  {', '.join(r.error_kinds) or '-'}  {seen or '-'}  last {last}  {rate}{certain}"
            )
        return 0

    def missing(folder: str) -> int:
        if args.json:
            _print_json([])
        else:
            print(f"no rules: no memory at {folder} yet (the folder does not exist)")
        return 0

    return _run(args, body, on_missing=missing)


def _export(args: argparse.Namespace) -> int:
    def report(rep: Any, salvaged: str = "") -> int:
        if args.json:
            _print_json(rep.model_dump())
        else:
            print(
                f"exported {rep.cases} cases, {rep.rules} rules, {rep.exposures} exposures to {rep.path}{salvaged}"
            )
        return 0

    def body(mem: Memory) -> int:
        return report(mem.export_jsonl(args.file))

    def salvage(exc: Any) -> int:
        from kernelwright.memory.core import export_salvaged

        rep = export_salvaged(exc.path, args.file)
        print(f"kernelwright memory: {exc}", file=sys.stderr)
        if rep.cases + rep.rules + rep.exposures == 0:
            return 1
        return report(rep, " (salvaged from the damaged memory)")

    return _run(args, body, on_damaged=salvage, on_missing=_nothing_to("export"))


def _import(args: argparse.Namespace) -> int:
    def body(mem: Memory) -> int:
        rep = mem.import_jsonl(args.file)
        if args.json:
            _print_json(rep.model_dump())
        else:
            print(f"imported {rep.cases} cases, {rep.rules} rules, {rep.exposures} exposures from {rep.path}")
        return 0

    return _run(args, body)


def _prune(args: argparse.Namespace) -> int:
    from kernelwright.memory import installed_versions

    def body(mem: Memory) -> int:
        installed = None if args.keep_toolchain else installed_versions()
        rep = mem.rules.prune(installed=installed, min_samples=args.min_samples, dry_run=args.dry_run)
        if args.json:
            _print_json(rep.model_dump())
            return 0
        verb = "would drop" if rep.dry_run else "dropped"
        print(f"{verb} {len(rep.removed)} rules, kept {rep.kept}")
        for r in rep.removed:
            print(f"  {r.id}  {r.text}\n      {r.reason}")
        return 0

    return _run(args, body, on_missing=_nothing_to("prune"))


def _relabel(args: argparse.Namespace) -> int:
    from collections import Counter

    def body(mem: Memory) -> int:
        changed = mem.cases.relabel(dry_run=args.dry_run)
        moves = Counter(f"{old} -> {case.outcome}" for case, old in changed)
        if args.json:
            _print_json(
                {"dry_run": args.dry_run, "changed": len(changed), "moves": dict(sorted(moves.items()))}
            )
            return 0
        verb = "would relabel" if args.dry_run else "relabelled"
        print(f"{verb} {len(changed)} of {mem.cases.count()} cases")
        for move, n in sorted(moves.items()):
            print(f"  {move}: {n}")
        return 0

    return _run(args, body, on_missing=_nothing_to("relabel"))


def _forget(args: argparse.Namespace) -> int:
    def body(mem: Memory) -> int:
        rules = {i: mem.rules.get(i) for i in args.ids}
        cases = {i: mem.cases.get(i) for i in args.ids if rules[i] is None}
        unknown = [i for i in args.ids if rules[i] is None and cases.get(i) is None]
        if unknown:
            print(f"kernelwright memory: no rule or case {', '.join(unknown)} here (ids: `kernelwright memory "
                  "rules --all --json`, `kernelwright memory export FILE`); nothing deleted", file=sys.stderr)  # fmt: skip
            return 1
        rule_texts = {i: r.text for i, r in rules.items() if r is not None}
        case_lines = {i: f"{c.task_name}: {c.outcome}" for i, c in cases.items() if c is not None}
        mem.rules.delete(list(rule_texts))
        # a deleted case's ancestors keep the downstream credit it gave them; its children keep their lineage
        mem.cases.delete(list(case_lines))
        if args.json:
            _print_json({"forgotten": args.ids, "rules": list(rule_texts), "cases": list(case_lines)})
        else:
            print(f"forgot {len(rule_texts)} rule(s), {len(case_lines)} case(s)")
            for i, text in {**rule_texts, **case_lines}.items():
                print(f"  {i}  {text}")
        return 0

    return _run(args, body, on_missing=_nothing_to("forget"))
