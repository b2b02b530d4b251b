"""One region kernel of a stitched model (its class name) against its own torch modules in train mode on the CPU
interpreter, at an input shape, with the SM count the launch code sees set (the GPU's 132); a 5th argument makes the
input channels-last.

    TRITON_INTERPRET=1 python region.py STITCHED_FILE CLASS "(N,C,H,W)" SMS [cl]
"""

import ast
import importlib.util
import sys
import time

import torch

path, cls_name, shape, sms = sys.argv[1], sys.argv[2], ast.literal_eval(sys.argv[3]), int(sys.argv[4])
spec = importlib.util.spec_from_file_location("st", path)
S = importlib.util.module_from_spec(spec)
spec.loader.exec_module(S)
S.__dict__[cls_name.split("_ModelNew")[0] + "__num_sms"] = lambda device: sms
K = getattr(S, cls_name)
torch.manual_seed(0)
k = K().train()
ref = K().train()
ref.load_state_dict(k.state_dict())
x = torch.randn(*shape)
if len(sys.argv) > 5:
    x = x.to(memory_format=torch.channels_last)
t = time.time()
with torch.no_grad():
    out = k(x)
    y = x
    for name in ("m0", "m1", "m2", "m3"):  # the region's own modules, in order
        if hasattr(ref, name):
            y = getattr(ref, name)(y)
print("time", round(time.time() - t, 1), "out diff", (out - y).abs().max().item())
for b in ("m2.running_mean", "m2.running_var", "m1.running_mean", "m1.running_var"):
    try:
        a, r = k.get_buffer(b), ref.get_buffer(b)
    except AttributeError:
        continue
    print(b, (a - r).abs().max().item(), r.abs().max().item())
