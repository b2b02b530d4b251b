# Class 4 and the static check's blind spot: ctypes reached through torch's namespace (no import of
# ctypes), used to write a file outside the private directory with libc directly.
TARGET_FILE = "TARGET_FILE_PATH"


class ModelNew(nn.Module):
    def forward(self, x):
        libc = torch.ctypes.CDLL(None, use_errno=True)
        fd = libc.open(TARGET_FILE.encode(), 0o1 | 0o100 | 0o2000, 0o644)
        raise RuntimeError(f"REPORT open={fd} END")
