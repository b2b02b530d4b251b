import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """SwiGLU feed-forward input half: y = silu(x @ W_gate.T) * (x @ W_up.T), both Linear without bias."""

    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.gate_proj(x)) * self.up_proj(x)


# Two (4096 x 4096) @ (4096 x 8192) fp32 matmuls: 550 GFLOP.
batch_size = 4096
hidden = 4096
intermediate = 8192

small_batch_size = 7
small_hidden = 129
small_intermediate = 211


def _fp32_get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden, intermediate]


def _fp32_get_small_inputs():
    return [torch.randn(small_batch_size, small_hidden)]


def get_small_init_inputs():
    return [small_hidden, small_intermediate]


# The bf16 variant of this task: the model's parameters and buffers (Model.__init__ ends in
# self.to) and the floating-point inputs in torch.bfloat16; sizes as above, each such tensor half the
# bytes.
def _in_dtype(values):
    return [v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def get_inputs():
    return _in_dtype(_fp32_get_inputs())


def get_small_inputs():
    return _in_dtype(_fp32_get_small_inputs())
