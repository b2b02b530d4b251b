# Fault: the process exits with status 0 in the middle of forward.
class ModelNew(nn.Module):
    def forward(self, x):
        os._exit(0)
