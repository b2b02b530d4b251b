import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(layer_norm(linear(x))), the norm over the output features."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.ln = nn.LayerNorm(out_features)
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.ln(self.linear(x)))


# (8192 x 4096) @ (4096 x 4096) fp32: 275 GFLOP; each norm row spans 4096 outputs.
batch_size = 8192
in_features = 4096
out_features = 4096

small_batch_size = 7
small_in_features = 201
small_out_features = 135


def _fp32_get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]


def _fp32_get_small_inputs():
    return [torch.randn(small_batch_size, small_in_features)]


def get_small_init_inputs():
    return [small_in_features, small_out_features]


# The bf16 variant of this task: the model's parameters and buffers (Model.__init__ ends in
# self.to) and the floating-point inputs in torch.bfloat16; sizes as above, each such tensor half the
# bytes.
def _in_dtype(values):
    return [v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def get_inputs():
    return _in_dtype(_fp32_get_inputs())


def get_small_inputs():
    return _in_dtype(_fp32_get_small_inputs())
