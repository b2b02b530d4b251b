# Class 5: compute in another thread (out of the recorder's sight), then copy with a kernel.
import threading


class ModelNew(nn.Module):
    def forward(self, x):
        box = []
        t = threading.Thread(target=lambda: box.append(x.clamp(min=0)))
        t.start()
        t.join()
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 4096),)](box[0], out, x.numel(), BLOCK=4096)
        return out
