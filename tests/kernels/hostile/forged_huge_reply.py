# Class 1 and a cost to the judge: during forward, write a "called" answer onto the channel that declares
# a 1 GiB output in a sealed (sparse) memfd, hoping the judge takes it as the answer and maps it.
import fcntl
import json
import socket
import struct

NUMEL = 1 << 28


def forge():
    fd = os.memfd_create("forged", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, NUMEL * 4)  # sparse: costs this process nothing
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    msg = {"op": "called", "launches": 1, "state": [],
           "structure": {"T": 0, "shape": [NUMEL], "dtype": "float32", "device": "cpu"},
           "evidence": {"events": [], "truncated": False, "before": [], "outputs": [], "launch_names": {}}}
    data = json.dumps(msg).encode()
    for n in range(3, 64):
        try:
            s = socket.socket(fileno=os.dup(n))
            if s.family == socket.AF_UNIX:
                socket.send_fds(s, [struct.pack("!I", len(data)) + data], [fd])
            s.detach()
        except OSError:
            pass


class ModelNew(nn.Module):
    def forward(self, x):
        forge()
        return relu(x)
