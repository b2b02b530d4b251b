"""Where a half-precision convolution task's time goes: cuDNN in both layouts, torch.compile, and the
conv writer's Triton programs config by config, in one process on one GPU.

For each task (default: the bf16 convolution tasks of tasks/level2_bf16), with the task's full inputs:
- eager forward, torch.compile forward (default mode);
- the convolution alone through cuDNN: NCHW as given, and channels-last (input and weight converted
  before the timing), plus the two conversions on their own (input to channels-last, the convolution's
  output back to NCHW) and cuBLAS on the implicit GEMM's sizes (M = output pixels, N = output channels
  per group, K = input channels per group x taps);
- the conv writer's implicit-GEMM programs (providers/offline/families/conv/conv.py) for the configs asked, each run
  on the input as given and on a channels-last copy (where the program's NHWC copy is then a view: the
  kernel alone), each checked against the reference output (max error over the output's RMS).
Timings: triton.testing.do_bench (L2 flushed between runs), median ms. Results as JSON (--out).
fp32 tasks: TF32 is off for cuDNN and cuBLAS (strict fp32, as the harness judges them) unless --tf32.

    python benchmarks/probes/conv_half_probe.py --out probe.json [--tasks 09,10] [--configs 'BLOCK_M=256;num_stages=4,...']

--configs: ';'-separated entries, each a ','-separated list of ConvConfig fields over the writer's default
for the task (an empty entry is the default itself). Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton.testing  # noqa: E402
from _common import load_program, max_err_over_rms  # noqa: E402

from kernelwright.providers.offline.families.conv.conv import (  # noqa: E402
    analyze_conv_task,
    conv_configs,
    conv_designs,
    emit_conv_program,
)
from kernelwright.providers.offline.families.conv.conv_writer import config_from_pairs  # noqa: E402
from kernelwright.tasks import exec_task_module  # noqa: E402


def _ms(fn: Any) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def _time_program(model: Any, inputs: list[Any]) -> dict[str, float]:
    """The program's forward on the inputs as given and, for 2-D/3-D inputs, on a channels-last copy of the
    first (where its NHWC copy is a view: the kernels alone)."""
    times = {"ms": _ms(lambda: model(*inputs))}
    x = inputs[0]
    if x.dim() in (4, 5):
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        xs = [x.contiguous(memory_format=fmt), *inputs[1:]]
        times["ms_input_cl"] = _ms(lambda: model(*xs))
    return times


def _parse_configs(text: str) -> list[dict[str, Any]]:
    entries = []
    for entry in text.split(";"):
        pairs: dict[str, Any] = {}
        for kv in filter(None, (p.strip() for p in entry.split(","))):
            k, v = kv.split("=", 1)
            pairs[k.strip()] = v.strip()
        entries.append(pairs)
    return entries


def probe_task(path: Path, configs: list[dict[str, Any]], folder: Path) -> dict[str, Any]:
    """One task's row: the baselines, then the writer's program for each config (written under `folder`)."""
    source = path.read_text()
    mod = exec_task_module(source, "task_" + path.stem, filename=str(path))
    torch.manual_seed(0)
    ref_model = mod.Model(*mod.get_init_inputs()).cuda().eval()
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in mod.get_inputs()]
    x = inputs[0]
    entry: dict[str, Any] = {"task": path.stem, "input": list(x.shape), "dtype": str(x.dtype)}
    with torch.no_grad():
        ref = ref_model(*inputs)
        entry["eager_ms"] = _ms(lambda: ref_model(*inputs))
        compiled = torch.compile(ref_model)
        compiled(*inputs)
        entry["compile_ms"] = _ms(lambda: compiled(*inputs))
        conv = next(m for m in ref_model.modules() if isinstance(m, torch.nn.modules.conv._ConvNd))
        w, b = conv.weight, conv.bias
        fn = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[x.dim()]
        args = (conv.stride, conv.padding, conv.dilation, conv.groups)
        if isinstance(conv, torch.nn.ConvTranspose2d | torch.nn.ConvTranspose3d | torch.nn.ConvTranspose1d):
            entry["note"] = "transposed: cuDNN rows skipped"
        else:
            y = fn(x, w, b, *args)
            entry["cudnn_nchw_ms"] = _ms(lambda: fn(x, w, b, *args))
            if x.dim() in (4, 5):
                fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
                xc, wc = x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)
                yc = fn(xc, wc, b, *args)
                entry["cudnn_cl_ms"] = _ms(lambda: fn(xc, wc, b, *args))
                entry["cudnn_cl_err"] = max_err_over_rms(yc, y)
                entry["x_to_cl_ms"] = _ms(lambda: x.contiguous(memory_format=fmt))
                entry["y_cl_to_nchw_ms"] = _ms(lambda: yc.contiguous())
            # the implicit GEMM's sizes through cuBLAS
            g = conv.groups
            m_rows = y.shape[0] * y[0, 0].numel()
            k_red = w.shape[1] * w[0, 0].numel()
            a = torch.randn(m_rows, k_red, device="cuda", dtype=x.dtype)
            bm = torch.randn(k_red, w.shape[0] // g, device="cuda", dtype=x.dtype)
            entry["gemm_sizes"] = [m_rows, w.shape[0] // g, k_red, g]
            entry["cublas_gemm_ms"] = _ms(lambda: a @ bm) * g
            del a, bm
        analysis = analyze_conv_task(source, path.stem)
        if analysis.plan is None:
            entry["writer"] = "no plan"
            return entry
        rows = []
        for pairs in configs:
            row: dict[str, Any] = {"config": dict(pairs)}
            try:
                design = pairs.pop("design", None) or conv_designs(analysis.plan)[0]
                cfg = config_from_pairs(pairs, conv_configs(design, analysis.plan, "strict")[0])
                code = emit_conv_program(analysis.plan, source, design=design, config=cfg)
                new_mod = load_program(code, folder / f"cand_{path.stem}_{len(rows)}.py")
                torch.manual_seed(0)
                model = new_mod.ModelNew(*mod.get_init_inputs()).cuda().eval()
                model.load_state_dict(ref_model.state_dict())
                out = model(*inputs)
                torch.cuda.synchronize()
                row["label"] = code.splitlines()[0]
                row["err"] = max_err_over_rms(out, ref)
                row.update(_time_program(model, inputs))
            except Exception as exc:  # a config that fails is a row, not the end of the probe
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rows.append(row)
            print(json.dumps({path.stem: row}), flush=True)
        entry["writer"] = rows
    return entry


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--suite", default="level2_bf16")
    ap.add_argument("--tasks", default="09,10,20,24,27", help="comma-separated task-file prefixes")
    ap.add_argument("--configs", default="", help="';'-separated config entries over the default")
    ap.add_argument("--tf32", action="store_true", help="let cuDNN and cuBLAS use TF32 for fp32 tasks")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        ap.error("needs a CUDA GPU")
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    folder = ROOT / "tasks" / args.suite
    paths = [p for s in args.tasks.split(",") for p in sorted(folder.glob(f"{s}*.py"))]
    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "tf32": args.tf32,
        "tasks": [],
    }
    folder = Path(tempfile.mkdtemp(prefix="kw-probe-"))  # Triton reads a kernel's source from its file
    for path in paths:
        t0 = time.perf_counter()
        try:
            entry = probe_task(path, _parse_configs(args.configs), folder)
        except Exception as exc:
            entry = {"task": path.stem, "error": f"{type(exc).__name__}: {exc}"}
        entry["wall_s"] = round(time.perf_counter() - t0, 1)
        out["tasks"].append(entry)
        Path(args.out).write_text(json.dumps(out, indent=1))
        print(json.dumps({k: v for k, v in entry.items() if k != "writer"}), flush=True)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
