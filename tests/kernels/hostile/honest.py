# An honest candidate: must pass, before and after every hostile one.
class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
