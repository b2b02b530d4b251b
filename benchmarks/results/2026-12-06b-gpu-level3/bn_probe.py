"""Which BatchNorm's running statistics a stitched level-3 model gets wrong after one train-mode forward on
the GPU, and by how much: the reference and the stitched model built alike (same seed, state copied), one
forward each on the published inputs, every buffer compared.

    python bn_probe.py KB_DIR STITCHED_DIR 27 26 ...
"""

import glob
import importlib.util
import os
import sys
from pathlib import Path

import torch


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kb, stitched_dir = sys.argv[1], sys.argv[2]
if (
    os.environ.get("STRICT") == "1"
):  # the judge's strict precision: no TF32 in torch's convolutions or matmuls
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    print("strict fp32")
for number in sys.argv[3:]:
    ref_path = glob.glob(f"{kb}/{number}_*.py")[0]
    stem = Path(ref_path).stem
    R = load(ref_path, f"ref{number}")
    S = load(f"{stitched_dir}/{stem}_stitched.py", f"st{number}")
    init = R.get_init_inputs()
    torch.manual_seed(0)
    ref = R.Model(*init).cuda()
    torch.manual_seed(0)
    new = S.ModelNew(*init).cuda()
    new.load_state_dict(ref.state_dict())
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in R.get_inputs()]
    for mode in ("train", "eval"):
        getattr(ref, mode)()
        getattr(new, mode)()
        with torch.no_grad():
            a = ref(*inputs)
            b = new(*inputs)
        torch.cuda.synchronize()
        print(
            f"{stem} {mode}: output max |diff| {(a - b).abs().max().item():.3e} of max |ref| {a.abs().max().item():.3e}"
        )
    rb, nb = dict(ref.named_buffers()), dict(new.named_buffers())
    bad = []
    for k, v in rb.items():
        if v.dtype.is_floating_point:
            d = (v - nb[k]).abs()
            tol = 1e-5 + 1e-4 * v.abs()
            if (d > tol).any():
                bad.append(k)
                if len(bad) <= 8:
                    i = int(d.argmax())
                    print(
                        f"  {k}: {(d > tol).sum().item()}/{v.numel()} off, worst [{i}] ref {v.flatten()[i].item():.6g} "
                        f"new {nb[k].flatten()[i].item():.6g}; ratio of means new/ref {(nb[k].mean() / v.mean()).item():.4f}"
                    )
    print(
        f"  {len(bad)} of {sum(1 for v in rb.values() if v.dtype.is_floating_point)} float buffers off: {bad[:20]}"
    )
