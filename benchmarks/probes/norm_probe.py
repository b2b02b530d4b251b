"""Where the time goes in a fused layer norm + GELU (level2/04): the offline writer's programs against a
hand copy of the kernel torch.compile writes for it, and one-change variants between the two.

Each variant is a complete program (ModelNew) run on the task's full inputs; all are checked against the
eager reference (max abs error printed) and timed with triton.testing.do_bench (L2 flushed between
calls), next to torch.compile. A diagnostic, not a harness figure: the harness (benchmarks/
design_sweep.py) is what RESULTS.md quotes. The GELU variants compare libdevice's erf formula with the
writer's polynomial `_kw_gelu`; two DIAGNOSTIC rows leave GELU out (wrong output, their error shows it)
to time the layer norm alone in the same kernel.

Usage, from the repository root, on a CUDA machine:
    python benchmarks/probes/norm_probe.py [--out DIR]
Writes DIR/norm_probe.json (DIR defaults to $OUT, else ./norm-probe-out) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _common import load_program, task_path  # noqa: E402

from kernelwright.providers.offline.choice.variants import program_variant  # noqa: E402
from kernelwright.providers.offline.emit.emit import HELPERS  # noqa: E402
from kernelwright.tasks import exec_task_module, load_task, task_inputs  # noqa: E402

# torch.compile's kernel for this task (torch 2.11, autotuned: XBLOCK=1, R0_BLOCK=4096, 16 warps), its
# helpers written out; sizes are Python constants as Inductor emits them, or arguments (STATIC=False).
INDUCTOR_LIKE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
    delta = mean_2 - mean_1
    new_weight = weight_1 + weight_2
    w2_over_w = tl.where(new_weight == 0.0, 0.0, weight_2 / new_weight)
    return mean_1 + delta * w2_over_w, m2_1 + m2_2 + delta * delta * weight_1 * w2_over_w, new_weight


@triton.jit
def kern(out_ptr, x_ptr, w_ptr, b_ptr, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    __SIZES__
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = __XMASK__
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    mean = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    m2 = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    weight = tl.zeros([XBLOCK, R0_BLOCK], tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        m = r0_mask & xmask
        v = tl.load(x_ptr + (r0_index + r0_numel * x0), m, eviction_policy="evict_last", other=0.0)
        if r0_offset == 0:
            n_mean, n_m2, n_w = v, tl.zeros_like(v), tl.full(v.shape, 1, v.dtype)
        else:
            delta = v - mean
            n_w = weight + 1
            n_mean = mean + delta / n_w
            n_m2 = m2 + delta * (v - n_mean)
        mean = tl.where(m, n_mean, mean)
        m2 = tl.where(m, n_m2, m2)
        weight = tl.where(m, n_w, weight)
    mu, var_sum, _ = tl.reduce((mean, m2, weight), 1, _combine)
    mu = mu[:, None]
    rstd = tl.rsqrt(var_sum[:, None] / r0_numel + 1e-05)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        m = r0_mask & xmask
        v = tl.load(x_ptr + (r0_index + r0_numel * x0), m, eviction_policy="evict_first", other=0.0)
        w = tl.load(w_ptr + r0_index, r0_mask, eviction_policy="evict_last", other=0.0)
        b = tl.load(b_ptr + r0_index, r0_mask, eviction_policy="evict_last", other=0.0)
        y = (v - mu) * rstd * w + b
        y = __GELU__
        tl.store(out_ptr + (r0_index + r0_numel * x0), y, m)


class ModelNew(nn.Module):
    def __init__(self, normalized_dim):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_dim)

    def forward(self, x):
        out = torch.empty_like(x)
        M, N = x.shape
        kern[(M,)](out, x, self.ln.weight, self.ln.bias, M, N, XBLOCK=1, R0_BLOCK=__RB__, num_warps=__W__,
                   num_stages=1)
        return out
"""


def inductor_like(static: bool, row_mask: bool, rb: int = 4096, warps: int = 16, poly: bool = False) -> str:
    """The hand copy; `poly` swaps libdevice's erf GELU for the writer's `_kw_gelu`."""
    sizes = "xnumel = 16384\n    r0_numel = 8192" if static else "pass"
    xmask = "xindex < xnumel" if row_mask else "tl.full([XBLOCK], True, tl.int1)[:, None]"
    code = (INDUCTOR_LIKE.replace("__SIZES__", sizes).replace("__XMASK__", xmask)
            .replace("__RB__", str(rb)).replace("__W__", str(warps))
            .replace("__GELU__", "_kw_gelu(y)" if poly else ERF_GELU.format("y")))  # fmt: skip
    return code.replace("\n\n@triton.jit", "\n" + HELPERS["_kw_gelu"] + "\n@triton.jit", 1) if poly else code


ERF_GELU = "(0.5 * {0} * (1.0 + tl.erf({0} * 0.7071067811865476)))"


def erf_gelu(code: str) -> str:
    """A writer program with libdevice's erf GELU (what the writer emitted before `_kw_gelu`)."""
    swapped = re.sub(r"(?<!def )_kw_gelu\((\w+)\)", lambda m: ERF_GELU.format(m.group(1)), code)
    assert swapped != code, "the program computes no GELU"
    return swapped


def without_gelu(code: str) -> str:
    """Diagnostic only, its output is wrong: the program with GELU left out (layer norm alone)."""
    return re.sub(r"(?<!def )_kw_gelu\((\w+)\)", r"\1", code)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "norm-probe-out"))
    args = ap.parse_args(argv)
    import torch
    import triton.testing

    torch.backends.cuda.matmul.allow_tf32 = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = task_path("level2/04")
    task = load_task(path)
    ref_mod = exec_task_module(task.source, task.name)
    torch.manual_seed(0)
    model = ref_mod.Model(*ref_mod.get_init_inputs()).cuda()
    with torch.no_grad():
        model.ln.weight.uniform_(0.5, 1.5)
        model.ln.bias.uniform_(-0.5, 0.5)
    (x,) = task_inputs(ref_mod, small=False, seed=0, device="cuda")
    with torch.no_grad():
        expected = model(x)

    def writer(design: str, **config: int) -> str:
        return program_variant(task.source, task.name, design, config).code

    programs = {
        "writer row_registers": writer("row_registers"),
        "writer row_registers STATIC": writer("row_registers", STATIC=1),
        "writer welford 4096/16 STATIC": writer("welford", BLOCK_R=4096, num_warps=16, STATIC=1),
        "writer two_pass 4096/16 STATIC": writer("two_pass", BLOCK_R=4096, num_warps=16, STATIC=1),
        "inductor-like (static sizes)": inductor_like(True, False),
        "inductor-like (static sizes), _kw_gelu": inductor_like(True, False, poly=True),
        "inductor-like, runtime sizes": inductor_like(False, False),
        "inductor-like, runtime sizes + row mask": inductor_like(False, True),
        "inductor-like, 2048/8": inductor_like(True, False, 2048, 8),
        "inductor-like, 8192/16": inductor_like(True, False, 8192, 16),
        # GELU: libdevice's erf against the writer's polynomial `_kw_gelu`
        "writer row_prefetch/16, erf GELU": erf_gelu(writer("row_prefetch", num_warps=16)),
        "writer row_prefetch/16, _kw_gelu": writer("row_prefetch", num_warps=16),
        "writer row_prefetch/32, _kw_gelu": writer("row_prefetch", num_warps=32),
        "writer row_registers STATIC/16, erf GELU": erf_gelu(writer("row_registers", STATIC=1, num_warps=16)),
        "writer row_registers STATIC/16, _kw_gelu": writer("row_registers", STATIC=1, num_warps=16),
        "writer row_registers STATIC/8, _kw_gelu": writer("row_registers", STATIC=1, num_warps=8),
        "writer row_registers STATIC/32, _kw_gelu": writer("row_registers", STATIC=1, num_warps=32),
        "writer row_registers/16, _kw_gelu": writer("row_registers", num_warps=16),
        "DIAGNOSTIC, wrong output: row_prefetch/16 without GELU": without_gelu(
            writer("row_prefetch", num_warps=16)
        ),
        "DIAGNOSTIC, wrong output: row_registers STATIC/16 without GELU": without_gelu(
            writer("row_registers", STATIC=1, num_warps=16)
        ),
    }
    rows = []
    tmp = tempfile.mkdtemp(prefix="norm-probe-")  # Triton reads a kernel's source from its file
    compiled = torch.compile(model)
    with torch.no_grad():
        compiled(x)
        rows.append(
            {"variant": "torch.compile", "ms": triton.testing.do_bench(lambda: compiled(x)), "err": 0.0}
        )
        rows.append({"variant": "eager", "ms": triton.testing.do_bench(lambda: model(x)), "err": 0.0})
        for label, code in programs.items():
            try:
                mod = load_program(code, Path(tmp) / f"probe_{len(rows)}.py")
                cand = mod.ModelNew(*ref_mod.get_init_inputs()).cuda()
                cand.load_state_dict(model.state_dict())
                err = (cand(x) - expected).abs().max().item()
                ms = triton.testing.do_bench(lambda: cand(x))  # noqa: B023 (timed at once)
                rows.append({"variant": label, "ms": ms, "err": err})
            except Exception as exc:
                rows.append({"variant": label, "error": str(exc)[-400:]})
            print(rows[-1], flush=True)
    (out / "norm_probe.json").write_text(json.dumps(rows, indent=1))
    base = rows[0]["ms"]
    for r in rows:
        if "ms" in r:
            print(
                f"{r['variant']:45s} {r['ms']:.4f} ms  vs compile {base / r['ms']:.3f}  max err {r['err']:.2e}"
            )
        else:
            print(f"{r['variant']:45s} error: {r['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
