"""One region kernel of a stitched model (its class name) against its own torch modules in train mode on the CPU
interpreter, at an input shape, with the SM count the launch code sees set (the GPU's 132); a 5th argument makes the
input channels-last. TRITON_INTERPRET=1 python region.py STITCHED_FILE CLASS "(N,C,H,W)" SMS [cl]"""
import sys, time, torch, importlib.util
st = sys.argv[1]; cls_name = sys.argv[2]; prefix = cls_name.split('_ModelNew')[0]
shape = eval(sys.argv[3]); sms = int(sys.argv[4])
spec = importlib.util.spec_from_file_location("st", st); S = importlib.util.module_from_spec(spec); spec.loader.exec_module(S)
S.__dict__[prefix + "__num_sms"] = lambda device: sms
K = getattr(S, cls_name)
torch.manual_seed(0)
k = K().train()
ref = K().train(); ref.load_state_dict(k.state_dict())
x = torch.randn(*shape)
if len(sys.argv) > 5: x = x.to(memory_format=torch.channels_last)
# reference: the region's own torch ops (m0..m3 modules called in order)
t = time.time()
with torch.no_grad():
    out = k(x)
    y = x
    for name in ("m0", "m1", "m2", "m3"):
        if hasattr(ref, name): y = getattr(ref, name)(y)
print("time", round(time.time()-t,1), "out diff", (out - y).abs().max().item())
for b in ("m2.running_mean", "m2.running_var", "m1.running_mean", "m1.running_var"):
    try:
        a = k.get_buffer(b); r = ref.get_buffer(b)
    except AttributeError: continue
    print(b, (a - r).abs().max().item(), r.abs().max().item())
