import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(layer_norm(linear(x))), the norm over the output features."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.ln = nn.LayerNorm(out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.ln(self.linear(x)))


# (8192 x 4096) @ (4096 x 4096) fp32: 275 GFLOP; each norm row spans 4096 outputs.
batch_size = 8192
in_features = 4096
out_features = 4096

small_batch_size = 7
small_in_features = 201
small_out_features = 135


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_in_features)]


def get_small_init_inputs():
    return [small_in_features, small_out_features]
