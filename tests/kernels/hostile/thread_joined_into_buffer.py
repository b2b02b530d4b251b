# Class 5: torch computes in a thread started and joined within forward, writing into a buffer made in
# __init__ (storage that existed before forward, which the record once took as it was); a Triton kernel
# copies the buffer out, so no thread is left running and the output comes from a kernel's write.
import _thread
import time


def fresh_thread_module():
    """A copy of the _thread module of its own, in case the one everyone imports is watched."""
    return _thread.__spec__.loader.create_module(_thread.__spec__)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.buf = torch.empty(5 * 123 * 77)

    def forward(self, x):
        done = []

        def work():
            torch.clamp(x.reshape(-1), min=0, out=self.buf[: x.numel()])
            done.append(1)

        fresh_thread_module().start_new_thread(work, ())
        while not done:
            time.sleep(0.001)
        time.sleep(0.01)  # let the thread end
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 4096),)](self.buf, out, x.numel(), BLOCK=4096)
        return out
