import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer normalization over the last three dimensions (features, dim1, dim2), with a learned
    elementwise scale and shift of that shape."""

    def __init__(self, normalized_shape: tuple[int, ...]):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


# 16 x (64 x 256 x 256) fp32 (the published size): 256 MiB read, 256 MiB written, weight and bias
# 16 MiB each; each of the 16 rows normalized is 4M elements (16 MiB) long.
batch_size = 16
features = 64
dim1 = 256
dim2 = 256

small_batch_size = 3
small_features = 5
small_dim1 = 9
small_dim2 = 11


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [(features, dim1, dim2)]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_features, small_dim1, small_dim2)]


def get_small_init_inputs():
    return [(small_features, small_dim1, small_dim2)]
