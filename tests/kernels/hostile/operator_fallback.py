# Class 5: the result from arithmetic operators (no torch function call in the source), a kernel beside.
class ModelNew(nn.Module):
    def forward(self, x):
        decorate()
        return x * (x > 0)
