# Class 4, no sandbox: read secrets from the environment and from the agent's /proc entry, and try to
# get them out through a file outside the private directory and a loopback socket. Reports what it
# managed in its error message (the test reads it there).
import socket

TARGET_FILE = "TARGET_FILE_PATH"
PORT = 0  # replaced by the test


def attempt(fn):
    try:
        fn()
        return "ok"
    except Exception as exc:
        return type(exc).__name__


def write_file():
    with open(TARGET_FILE, "a") as f:
        f.write("stolen\n")


def connect():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=2)
    s.sendall(b"stolen")
    s.close()


def agent_environ():
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if b"KW_TEST_SECRET" in f.read():
                        found.append(pid)
            except OSError:
                pass
    if not found:
        raise LookupError("no process environment with the secret")


class ModelNew(nn.Module):
    def forward(self, x):
        keys = sorted(k for k in os.environ if "KEY" in k or "TOKEN" in k or "SECRET" in k)
        raise RuntimeError(f"REPORT keys={keys} file={attempt(write_file)} net={attempt(connect)} "
                           f"proc={attempt(agent_environ)} END")
