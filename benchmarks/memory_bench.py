"""Memory at scale: insert N synthetic cases, then time retrieval and context building.

    .venv/bin/python benchmarks/memory_bench.py --cases 100000 --dir /tmp/kw-bench --out /tmp/kw-bench/result.json

Synthetic cases look like real ones: search trees per run (a large-step root, small steps and repairs
below it), 9 op families with realistic ops/shapes/dtypes, three hardware targets (70/20/10 %), a third
of attempts failed, kernels of about 1.5 kB with the `# kernelwright:` metadata line. Rules: 300, a
third over the injection threshold, with exposures. Inserts go in batches through the public API
(`ExperienceGraph.add_many`), so embeddings, lineage scores and locking are all part of the time.

Measured (each over --queries random new task signatures, after a warm-up):
- retrieval: `cases.search(signature, op_families, hardware, k=3)` (the warm tier's query);
- cross-hardware retrieval: the same with `other_hardware=True, correct_only=True` (the cold tier's);
- rules: `rules.relevant(...)`;
- context build: `build_context(...)` with memory, target, parent and feedback (all of the above);
- single add: one `cases.add` of a child under an existing case (the reflector's write per attempt).
Goals: retrieval p50 <= 20 ms, context build p50 <= 50 ms.
Writes a JSON report to --out (default $OUT/memory_bench.json when OUT is set) and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernelwright.hardware.result import Versions
from kernelwright.memory import Case, Exposure, Rule, open_memory
from kernelwright.memory.records import Evidence
from kernelwright.nodes.context_builder import build_context
from kernelwright.nodes.tokens import default_counter
from kernelwright.tasks.task import Task, TaskSignature

FAMILIES: dict[str, list[str]] = {
    "matmul": ["aten.mm", "aten.addmm", "aten.bmm"],
    "conv": ["aten.convolution"],
    "reduction": ["aten.sum", "aten.mean", "aten.amax"],
    "softmax": ["aten._softmax", "aten._log_softmax"],
    "norm": ["aten.native_layer_norm", "aten.native_group_norm", "aten.native_batch_norm"],
    "pointwise": ["aten.relu", "aten.gelu", "aten.add", "aten.mul", "aten.sigmoid", "aten.tanh"],
    "scan": ["aten.cumsum", "aten.cumprod"],
    "loss": ["aten.nll_loss_forward", "aten.mse_loss", "aten.smooth_l1_loss"],
    "pool": ["aten.max_pool2d_with_indices", "aten.avg_pool2d"],
}
DESIGNS: dict[str, list[str]] = {
    "matmul": ["tiled_gemm", "split_k", "persistent_gemm", "grouped_gemm"],
    "conv": ["implicit_gemm", "direct_conv", "winograd_like"],
    "reduction": ["rowwise_reduce", "two_pass_reduce", "atomic_reduce"],
    "softmax": ["rowwise_softmax", "online_softmax"],
    "norm": ["welford_rowwise", "two_pass_norm"],
    "pointwise": ["flat_elementwise", "vectorized_elementwise"],
    "scan": ["blocked_scan", "associative_scan"],
    "loss": ["fused_loss_reduce", "two_stage_loss"],
    "pool": ["window_pool", "tiled_pool"],
}
HARDWARE = [("nvidia-h100", 90, 0.7), ("nvidia-a100", 80, 0.2), ("amd-mi300x", None, 0.1)]
VERSIONS = [
    Versions(torch="2.13.0", triton="3.6.0", python="3.11.9"),
    Versions(torch="2.12.0", triton="3.5.1"),
]
ERRORS = [
    (
        "compile_error",
        "CompilationError: at {a}:{b}: AssertionError: All values in both first input shape must be >= 16!",
    ),
    ("compile_error", "CompilationError: at {a}:{b}: ValueError: arange's range must be a power of 2"),
    ("runtime_error", "RuntimeError: Triton Error [CUDA]: invalid argument (grid {a}x{b})"),
    ("mismatch", "mismatch: max abs error {a}.{b} at index [{a}, {b}] (rtol 1e-05, atol 1e-05)"),
    ("shape_mismatch", "output shape [{a}, {b}] differs from the reference's [{b}, {a}]"),
    ("timeout", "the run stage exceeded its time limit of {a} s"),
]
BODY = """import torch
import triton
import triton.language as tl


@triton.jit
def {design}_kernel(x_ptr, y_ptr, out_ptr, n_rows, n_cols, stride_x, stride_y, stride_o,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    y = tl.load(y_ptr + rows[:, None] * stride_y + cols[None, :], mask=mask, other=0.0)
    acc = x.to(tl.float32) * {k} + y.to(tl.float32)
    tl.store(out_ptr + rows[:, None] * stride_o + cols[None, :], acc, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x, y):
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        grid = lambda META: (triton.cdiv(n_rows, META["BLOCK_M"]),)
        {design}_kernel[grid](x, y, out, n_rows, n_cols, x.stride(0), y.stride(0), out.stride(0),
                              BLOCK_M={bm}, BLOCK_N={bn})
        return out
"""


def random_signature(rng: random.Random) -> TaskSignature:
    fams = [rng.choice(list(FAMILIES))]
    if rng.random() < 0.3:
        fams.append(rng.choice(["pointwise", "norm", "reduction"]))
    fams = list(dict.fromkeys(fams))
    ops = [rng.choice(FAMILIES[f]) for f in fams]
    nd = rng.choice([2, 2, 3, 4])
    shapes = [
        [rng.choice([1, 3, 5, 7, 16, 33, 64, 123, 128, 255, 512, 1024, 4096]) for _ in range(nd)]
        for _ in range(rng.choice([1, 2]))
    ]
    dtype = rng.choice(["float32", "float32", "float16", "bfloat16"])
    return TaskSignature(op_families=fams, ops=ops, input_shapes=shapes, input_dtypes=[dtype] * len(shapes))


def pick_hardware(rng: random.Random) -> tuple[str, int | None]:
    x = rng.random()
    for name, cc, p in HARDWARE:
        if x < p:
            return name, cc
        x -= p
    return HARDWARE[0][0], HARDWARE[0][1]


def synthetic_run(rng: random.Random, run_no: int, size: int) -> list[Case]:
    """One search tree: a root and `size - 1` descendants, parents always earlier in the list."""
    sig = random_signature(rng)
    hw, cc = pick_hardware(rng)
    versions = rng.choice(VERSIONS)
    fam = sig.op_families[0]
    run_id = f"run-{run_no:06d}"
    cases: list[Case] = []
    for _ in range(size):
        parent = rng.choice(cases) if cases else None
        action = (
            "large_step"
            if parent is None or rng.random() < 0.2
            else rng.choice(["small_step", "small_step", "repair"])
        )
        design = rng.choice(DESIGNS[fam])
        bm, bn = rng.choice([16, 32, 64, 128]), rng.choice([32, 64, 128, 256])
        header = f"# kernelwright: family={fam} design={design} config=BLOCK_M={bm},BLOCK_N={bn},num_warps={rng.choice([2, 4, 8])}"
        code = header + "\n" + BODY.format(design=design, k=rng.randint(1, 9), bm=bm, bn=bn)
        correct = rng.random() > 0.33
        base = parent.speedup if parent is not None and parent.speedup else 1.0
        speedup = max(0.05, base * rng.lognormvariate(0.02, 0.25)) if correct else None
        if correct and hw == "amd-mi300x" and rng.random() < 0.3:
            speedup = None  # some timings not meaningful
        kind, err = rng.choice(ERRORS)
        feedback = (
            err.format(a=rng.randint(1, 99), b=rng.randint(1, 99))
            if not correct
            else f"correct, {speedup or 0:.2f}x vs eager"
        )
        case = Case.from_attempt(
            signature=sig,
            code=code,
            correct=correct,
            speedup=speedup,
            parent=parent,
            hardware=hw,
            compute_capability=cc,
            versions=versions,
            task_name=f"task_{run_no % 2000:04d}_{fam}",
            action=action,
            idea=f"{action.replace('_', ' ')}: {design} with BLOCK_M={bm} BLOCK_N={bn}",
            feedback=feedback,
            run_id=run_id,
            confidence=rng.uniform(0.3, 1.0) if correct else 1.0,
        )
        if not correct:
            case.error_kind = kind
            case.stage = "compile" if kind == "compile_error" else "run"
        cases.append(case)
    return cases


def synthetic_rules(rng: random.Random, n: int) -> tuple[list[Rule], list[Exposure]]:
    rules = []
    verbs = ["use", "call", "pass", "store", "load", "launch", "reduce", "index", "cast", "autotune"]
    objs = [
        "tl.dot with block dimensions below 16",
        "tl.arange with a range that is not a power of two",
        "a grid axis larger than 65535",
        "torch functions inside a @triton.jit kernel",
        "a Python list as a block index",
        "fp16 accumulators for long reductions",
        "num_stages=4 with BLOCK_K=256 in fp32",
        "an unmasked load on the last block",
        "tl.atomic_add on bfloat16 outputs",
        "a non-constexpr block size in tl.zeros",
    ]
    now = time.time()
    for i in range(n):
        fam = rng.choice(list(FAMILIES))
        hw, _ = pick_hardware(rng)
        v = rng.choice(VERSIONS)
        count = rng.choice([1, 1, 2, 3, 4, 6, 10])
        rules.append(
            Rule(
                text=f"You cannot {rng.choice(verbs)} {rng.choice(objs)} in {fam} kernels (variant {i})",
                error_signature=f"compile_error: synthetic error <n> of kind {i % 17}",
                error_kinds=["compile_error"],
                op_families=[fam],
                count=count,
                evidence=[
                    Evidence(
                        case_id=f"case-{i}", error_kind="compile_error", excerpt="AssertionError", hardware=hw
                    )
                ],
                hardware=[hw],
                triton_versions=[v.triton[:3]],
                torch_versions=[v.torch[:4]],
                first_seen=now - rng.uniform(0, 1e6),
                last_seen=now,
            )
        )
    exposures = [
        Exposure(
            rule_ids=[r.id for r in rng.sample(rules, 3)],
            failed=rng.random() < 0.35,
            op_families=[rng.choice(list(FAMILIES))],
            hardware=pick_hardware(rng)[0],
        )
        for _ in range(n * 10)
    ]
    return rules, exposures


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def timed(fn: Any, n: int) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t) * 1000)
    return out


def summary(xs: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(pct(xs, 0.5), 2),
        "p95_ms": round(pct(xs, 0.95), 2),
        "mean_ms": round(statistics.fmean(xs), 2),
        "n": len(xs),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument(
        "--dir", default="/tmp/kernelwright-memory-bench", help="memory folder (recreated unless --reuse)"
    )
    ap.add_argument(
        "--reuse", action="store_true", help="keep an existing memory of the right size, skip inserting"
    )
    ap.add_argument(
        "--out", default=None, help="JSON report path (default $OUT/memory_bench.json when OUT is set)"
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    loc = Path(args.dir)
    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "cases_requested": args.cases,
    }

    marker = loc / ".memory-bench"
    if not args.reuse and loc.exists():
        if not marker.exists():
            # Never delete a folder this benchmark did not create (it could be someone's real memory).
            print(f"{loc} exists and was not made by this benchmark; pass another --dir", file=sys.stderr)
            return 2
        shutil.rmtree(loc)
    loc.mkdir(parents=True, exist_ok=True)
    marker.touch()
    mem = open_memory(loc)
    have = mem.cases.count()
    if have < args.cases:
        print(f"inserting {args.cases - have} cases into {loc} in batches of {args.batch} ...", flush=True)
        t0 = time.perf_counter()
        inserted, run_no, pending = 0, 0, []
        while have + inserted < args.cases:
            size = min(rng.randint(4, 30), args.cases - have - inserted - len(pending))
            if size > 0:
                pending.extend(synthetic_run(rng, run_no, size))
                run_no += 1
            if len(pending) >= args.batch or have + inserted + len(pending) >= args.cases:
                mem.cases.add_many(pending)
                inserted += len(pending)
                pending = []
                if inserted % 10_000 < args.batch:
                    el = time.perf_counter() - t0
                    print(
                        f"  {have + inserted:>7} cases  {el:7.1f} s  ({inserted / el:,.0f} cases/s)",
                        flush=True,
                    )
        insert_s = time.perf_counter() - t0
        rules, exposures = synthetic_rules(rng, 300)
        t1 = time.perf_counter()
        mem.rules.put_raw(rules)
        mem.rules.put_exposures(exposures)
        report["insert"] = {
            "cases": inserted,
            "seconds": round(insert_s, 1),
            "cases_per_s": round(inserted / insert_s, 1),
            "rules_and_exposures_s": round(time.perf_counter() - t1, 1),
        }
    mem.close()
    report["cases"] = None

    t = time.perf_counter()
    mem = open_memory(loc)
    n_total = mem.cases.count()
    report["open_s"] = round(time.perf_counter() - t, 2)
    report["cases"] = n_total
    report["rules"] = mem.rules.count()
    report["disk_mb"] = round(sum(p.stat().st_size for p in loc.rglob("*") if p.is_file()) / 2**20)

    # Disjoint sets of new task signatures per measurement, so each measured query is a first query
    # for its task (the process-wide cache of filter fields still grows as in a long-lived process);
    # the "repeat" measurements then ask again for the same tasks, as successive steps of a run do.
    qrng = random.Random(args.seed + 1)
    n_q = args.queries
    sets = {
        name: [random_signature(qrng) for _ in range(n_q)]
        for name in ("warmup", "retrieval", "cross", "rules", "context")
    }
    hw = "nvidia-h100"
    target = {"name": hw, "compute_capability": 90, "memory_bandwidth_gbs": 3350, "sm_count": 132}
    v = VERSIONS[0]
    parent_code = (
        "# kernelwright: family=matmul design=tiled_gemm config=BLOCK_M=64,BLOCK_N=64\n"
        + BODY.format(design="tiled_gemm", k=2, bm=64, bn=64)
    )
    source = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    found: list[int] = []

    def retrieve(sigs: list[TaskSignature]) -> Any:
        def run(i: int) -> None:
            found.append(
                len(
                    mem.cases.search(
                        sigs[i], op_families=sigs[i].op_families, hardware=hw, min_similarity=0.2, k=3
                    )
                )
            )

        return run

    def retrieve_cross(sigs: list[TaskSignature]) -> Any:
        def run(i: int) -> None:
            mem.cases.search(
                sigs[i],
                op_families=sigs[i].op_families,
                hardware=hw,
                other_hardware=True,
                correct_only=True,
                min_similarity=0.2,
                k=2,
            )

        return run

    def rules(sigs: list[TaskSignature]) -> Any:
        def run(i: int) -> None:
            mem.rules.relevant(sigs[i].key(), op_families=sigs[i].op_families, hardware=hw, versions=v, k=12)

        return run

    def context(sigs: list[TaskSignature]) -> Any:
        tasks = [Task(name=f"bench_{i}", source=source, signature=s) for i, s in enumerate(sigs)]

        def run(i: int) -> None:
            build_context(
                tasks[i],
                "small_step",
                parent_code=parent_code,
                feedback="correct, 1.31x vs eager",
                target=target,
                hardware=hw,
                versions=v,
                memory=mem,
                budget=8000,
            )

        return run

    timed(context(sets["warmup"]), min(20, n_q))  # first collection loads, imports
    report["retrieval"] = summary(timed(retrieve(sets["retrieval"]), n_q))
    report["retrieval"]["mean_results"] = round(statistics.fmean(found), 2)
    report["retrieval_cross_hardware"] = summary(timed(retrieve_cross(sets["cross"]), n_q))
    report["rules_relevant"] = summary(timed(rules(sets["rules"]), n_q))
    report["context_build"] = summary(timed(context(sets["context"]), n_q))
    report["retrieval_repeat"] = summary(timed(retrieve(sets["retrieval"]), n_q))
    report["context_build_repeat"] = summary(timed(context(sets["context"]), n_q))
    report["cached_filter_entries"] = len(mem.cases.facets)
    sigs = sets["context"]
    tasks = [Task(name="bench_sample", source=source, signature=sigs[0])]
    report["context_token_counter"] = default_counter().name
    sample = build_context(
        tasks[0],
        "small_step",
        parent_code=parent_code,
        feedback="correct",
        target=target,
        hardware=hw,
        versions=v,
        memory=mem,
        budget=8000,
    )
    report["context_sample"] = {
        "tokens_used": sample.tokens_used,
        "injected": len(sample.injected),
        "cut": len(sample.cut),
        "tiers": sample.tier_tokens,
    }

    parents = [r.case.id for r in mem.cases.search(sigs[0], hardware=hw, k=20)]

    def single_add(i: int) -> None:
        p = mem.cases.get(parents[i % len(parents)])
        assert p is not None
        mem.cases.add(
            Case.from_attempt(
                signature=p.signature,
                code=p.code,
                correct=True,
                speedup=1.1,
                parent=p,
                hardware=hw,
                run_id="bench-add",
            )
        )

    report["single_add_with_lineage"] = summary(timed(single_add, 20))
    mem.close()

    report["goals"] = {
        "retrieval_p50_le_20ms": report["retrieval"]["p50_ms"] <= 20,
        "context_build_p50_le_50ms": report["context_build"]["p50_ms"] <= 50,
    }
    text = json.dumps(report, indent=2)
    print(text)
    out = args.out or (
        os.path.join(os.environ["OUT"], "memory_bench.json") if os.environ.get("OUT") else None
    )
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
