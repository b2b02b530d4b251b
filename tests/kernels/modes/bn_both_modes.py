# Batch statistics and a running-statistics update in train mode; running statistics in eval mode.
class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        bn = self.bn
        if self.training:
            mean = x.mean(dim=(0, 2, 3))
            var = x.var(dim=(0, 2, 3), unbiased=False)
            n = x.numel() // x.shape[1]
            bn.running_mean.mul_(1 - bn.momentum).add_(bn.momentum * mean)
            bn.running_var.mul_(1 - bn.momentum).add_(bn.momentum * var * n / (n - 1))
            bn.num_batches_tracked.add_(1)
        else:
            mean, var = bn.running_mean, bn.running_var
        scale = bn.weight / torch.sqrt(var + bn.eps)
        return affine_relu(x, scale, bn.bias - mean * scale)
