@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        noise = torch.rand_like(x)  # the reference's draw, kept in torch
        out = torch.empty_like(x)
        add_kernel[(triton.cdiv(x.numel(), 1024),)](x, noise, out, x.numel(), BLOCK=1024)
        return out
