"""How many of a search's candidates are distinct programs: the offline writer through the optimize
graph on CPU (Triton interpreter, nothing timed), a few tasks x seeds, counting the distinct
`# kernelwright:` headers among each run's nodes. A candidate that repeats an earlier program costs a
slot of the budget and measures nothing new.

Usage, from the repository root:
    python benchmarks/search_distinct.py [--src CHECKOUT] [--budget 12] [--seeds 0,1] [--out DIR]
                                         [--tasks level2/23_convtranspose3d_maxpool_softmax_subtract_swish_max,...]
`--src` runs another checkout's code (e.g. a `git worktree` of an older commit) for a before/after.
Writes DIR/search_distinct.json (DIR defaults to $OUT, else ./search-distinct-out) and prints a table.
About 4 minutes on a 2-core machine with the defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS = (
    "level2/04_layernorm_gelu",
    "level1/11_layer_norm",
    "level2/24_conv2d_depthwise_batchnorm_relu6",
    "level1/09_softmax",
    "level2/05_rmsnorm_silu_gate",
    "level1/25_argmin_last_dim",
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default=str(ROOT), help="checkout whose code runs (default: this one)")
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--tasks", default=",".join(TASKS), help="comma-separated level/stem of bundled tasks")
    ap.add_argument("--out", default=os.environ.get("OUT", "search-distinct-out"))
    args = ap.parse_args(argv)
    src = Path(args.src).resolve()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(src))
    rows = []
    for task in args.tasks.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            run = out / f"{Path(task).name}_{seed}"
            cmd = [sys.executable, "-m", "kernelwright.cli.main", "optimize", f"tasks/{task}.py", "--model", "offline",
                   "--budget", str(args.budget), "--device", "cpu", "--seed", str(seed),
                   "--memory", str(run / "memory"), "--out", str(run), "--json"]  # fmt: skip
            proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=1800)
            if proc.returncode != 0:
                rows.append({"task": task, "seed": seed, "error": proc.stderr[-500:]})
                continue
            nodes = [n for n in json.loads(proc.stdout)["search"]["nodes_detail"] if n["id"] != "n0"]
            headers = [n.get("design") for n in nodes]
            rows.append({"task": task, "seed": seed, "nodes": len(nodes), "distinct": len(set(headers))})
            print(f"{task} seed {seed}: {rows[-1]['distinct']}/{rows[-1]['nodes']} distinct", flush=True)
    done = [r for r in rows if "nodes" in r]
    total = {"nodes": sum(r["nodes"] for r in done), "distinct": sum(r["distinct"] for r in done)}
    (out / "search_distinct.json").write_text(
        json.dumps({"commit": commit, "budget": args.budget, "rows": rows, "total": total}, indent=1)
    )
    print(f"commit {commit}: {total['distinct']} distinct programs of {total['nodes']} candidates")
    return 0 if len(done) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
