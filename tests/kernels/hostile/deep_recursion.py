# Fault: unbounded recursion with the interpreter's limit lifted.
def down(n):
    return down(n + 1) + 1


class ModelNew(nn.Module):
    def forward(self, x):
        sys.setrecursionlimit(10**8)
        down(0)
        return relu(x)
