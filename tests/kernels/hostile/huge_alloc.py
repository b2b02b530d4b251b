# Fault: a scratch tensor far beyond the task's footprint.
class ModelNew(nn.Module):
    def forward(self, x):
        scratch = torch.empty(3 << 30, dtype=torch.uint8)
        scratch.fill_(1)
        return relu(x)
