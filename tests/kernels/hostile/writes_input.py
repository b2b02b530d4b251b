# Class 6: the answer computed in place, over the caller's input.
class ModelNew(nn.Module):
    def forward(self, x):
        relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, x, x.numel(), BLOCK=4096)
        return x
