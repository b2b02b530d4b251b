# Fault: SystemExit in forward.
class ModelNew(nn.Module):
    def forward(self, x):
        out = relu(x)
        sys.exit(3)
        return out
