"""Print the Triton kernels torch.compile (Inductor) generates for bundled tasks, with the launch
configs its autotuner picked, to compare its schedule with the offline writer's on the same task.

Usage, from the repository root, on a CUDA machine:
    python benchmarks/inductor_code.py --tasks level2/04,level2/05 [--out DIR]
Writes DIR/inductor_<task>.py (DIR defaults to $OUT, else ./inductor-code-out) and prints where.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _common import task_path  # noqa: E402

from kernelwright.tasks import exec_task_module, load_task, task_inputs  # noqa: E402


def _picked_configs() -> list[str]:
    """'kernel: config' for every autotuned Triton kernel Inductor has loaded so far (best effort: the
    cache's layout is internal to torch)."""
    from torch._inductor.codecache import PyCodeCache

    mods = PyCodeCache.modules
    out = []
    for mod in mods.values() if isinstance(mods, dict) else mods:
        for name, obj in vars(mod).items():
            launchers = getattr(obj, "launchers", None)
            if launchers:
                cfg = launchers[0].config
                out.append(f"{name}: {cfg.kwargs} num_warps={cfg.num_warps} num_stages={cfg.num_stages}")
    return sorted(set(out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", required=True, help="comma-separated level/NN task specs")
    ap.add_argument("--out", default=os.environ.get("OUT", "inductor-code-out"))
    args = ap.parse_args(argv)
    import torch
    from torch._inductor.utils import run_and_get_code

    if not torch.cuda.is_available():
        raise SystemExit("inductor_code.py needs a CUDA GPU (Inductor writes Triton only for GPUs)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for spec in args.tasks.split(","):
        path = task_path(spec)
        task = load_task(path)
        module = exec_task_module(task.source, task.name)
        model = module.Model(*module.get_init_inputs()).cuda()
        inputs = task_inputs(module, small=False, seed=0, device="cuda")
        compiled = torch.compile(model)
        with torch.no_grad():
            _, codes = run_and_get_code(compiled, *inputs)
        dest = out / f"inductor_{path.stem}.py"
        picked = "\n".join(f"# {line}" for line in _picked_configs())
        dest.write_text(
            f"# configs picked by the autotuner:\n{picked}\n\n"
            + "\n\n# ---- next module ----\n\n".join(codes)
        )
        print(f"{path.stem}: {len(codes)} module(s) -> {dest}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
