# Class 2: the answer computed in Python from the input's numbers, made a tensor with torch.tensor and passed
# through a Triton kernel: the output depends on memory no recorded op wrote.


class ModelNew(nn.Module):
    def forward(self, x):
        answer = torch.tensor([max(v, 0.0) for v in x.flatten().tolist()], device=x.device).view_as(x)
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 4096),)](answer, out, x.numel(), BLOCK=4096)
        return out
