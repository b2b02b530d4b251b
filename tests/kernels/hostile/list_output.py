# Class 6: a list where the reference returns a tensor.
class ModelNew(nn.Module):
    def forward(self, x):
        return [relu(x)]
