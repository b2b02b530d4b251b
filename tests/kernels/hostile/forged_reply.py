# Class 1, forged verdicts: write a well-formed "called" answer, with the right output computed by torch
# and a made-up record of Triton writes, straight onto the candidate process's channel to the judge.
import json
import socket
import struct


def forge(out):
    import fcntl

    fd = os.memfd_create("forged", os.MFD_ALLOW_SEALING)
    os.write(fd, out.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    key = out.untyped_storage().data_ptr()
    msg = {"op": "called", "launches": 1,
           "structure": {"T": 0, "shape": list(out.shape), "dtype": "float32", "device": "cpu"},
           "evidence": {"events": [["triton", "relu_kernel", [key], [key]]], "truncated": False,
                        "before": [], "outputs": [key], "launch_names": {"relu_kernel": 1}}}
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
        decorate()
        out = torch.relu(x)
        forge(out)
        return torch.zeros_like(x)
