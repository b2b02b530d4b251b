# Class 5: the reference's own op computes the answer; a Triton copy makes it look like a kernel's output.
class ModelNew(nn.Module):
    def forward(self, x):
        r = torch.relu(x)
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 4096),)](r, out, x.numel(), BLOCK=4096)
        return out
