# Class 5: a Triton kernel writes the output (a copy of zeros), then numpy overwrites it in place with the
# answer: the output's last recorded write is the kernel's.
import numpy as np


class ModelNew(nn.Module):
    def forward(self, x):
        zeros = torch.zeros_like(x)
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 4096),)](zeros, out, x.numel(), BLOCK=4096)
        np.maximum(x.numpy(), 0, out=out.numpy())
        return out
