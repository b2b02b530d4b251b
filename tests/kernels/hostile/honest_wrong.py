# An honest but wrong candidate (off by a little): must fail, whatever ran before it.
class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x) * 1.001
