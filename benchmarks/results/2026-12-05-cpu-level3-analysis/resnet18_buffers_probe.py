"""ResNet18's stitched model against the fp32 and fp64 references: running statistics after one train-mode
forward (kept as it ran, reformatted; RUN is the run folder of `kernelwright optimize-model 9_ResNet18.py`
at 2x3x32x32 from 2026-12-04, whose stitched.py failed the judge on one running_mean element).

Printed per buffer that fails either rule or is layer4.1.bn2's: (name, elements failing strict against the
fp32 reference, elements failing the fp64-anchored rule, max |new - ref32|, max |new - ref64|,
max |ref32 - ref64|, E (99.9th percentile of |ref32 - ref64|), max ratio of |new - ref64| to the anchored
bound atol + rtol |ref64| + 16 max(E, e_i))."""

import copy
import os
import sys
import time
import types

os.environ["TRITON_INTERPRET"] = "1"
import torch  # noqa: E402

RUN = "/tmp/kwm/l3/runs4/9_ResNet18"


def load(path: str, name: str) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__file__ = path
    exec(compile(open(path).read(), path, "exec"), m.__dict__)
    return m


task = load(f"{RUN}/model.py", "task")
st = load(f"{RUN}/stitched.py", "stitched")
torch.manual_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
ref = task.Model(*task.get_init_inputs())
with torch.no_grad():  # perturbed state, as the judge does: non-trivial running stats
    for v in ref.buffers():
        if v.is_floating_point():
            v.add_(torch.rand_like(v) * 0.1)
new = st.ModelNew(*task.get_init_inputs())
new.load_state_dict(ref.state_dict())
ref64 = copy.deepcopy(ref).double()
x = task.get_inputs()[0]
print("input", list(x.shape))
for m in (ref, new, ref64):
    m.train()
t0 = time.time()
with torch.no_grad():
    o32, o64, on = ref(x), ref64(x.double()), new(x)
print("forward s", round(time.time() - t0, 1))
rows = []
b32, b64, bn = dict(ref.named_buffers()), dict(ref64.named_buffers()), dict(new.named_buffers())
for k, v in b32.items():
    if not v.is_floating_point():
        continue
    a64 = b64[k].to(v.dtype)
    e, got, vs32 = (v - a64).abs(), (bn[k] - a64).abs(), (bn[k] - v).abs()
    n = e.numel()
    E = float(e.flatten().kthvalue(max(1, int(0.999 * n))).values) if n > 1000 else float(e.max())
    bound = 1e-5 + 1e-4 * a64.abs() + 16 * torch.maximum(e, torch.tensor(E))
    strict_fail = int((vs32 > 1e-5 + 1e-4 * v.abs()).sum())
    anchored_fail = int((got > bound).sum())
    ratio = float((got / bound).max())
    rows.append(
        (k, strict_fail, anchored_fail, float(vs32.max()), float(got.max()), float(e.max()), E, ratio)
    )
for r in rows:
    if r[1] or r[2] or "layer4.1.bn2" in r[0]:
        print(r)
print(
    "strict failures:", sum(r[1] for r in rows), "anchored failures:", sum(r[2] for r in rows),
    "max ratio to anchored bound:", max(r[7] for r in rows),
)  # fmt: skip
print(
    "output: max |new-ref32|", float((on - o32).abs().max()),
    "max |ref32-ref64|", float((o32.double() - o64).abs().max()),
)  # fmt: skip
