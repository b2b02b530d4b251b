# Class 5: a CUDA graph (its replay launches kernels nobody records), reached through a computed name.
class ModelNew(nn.Module):
    def forward(self, x):
        graph = getattr(torch.cuda, "CUDA" + "Graph")()
        del graph
        return relu(x)
