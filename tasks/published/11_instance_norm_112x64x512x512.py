import torch
import torch.nn as nn


class Model(nn.Module):
    """InstanceNorm2d (no affine, no running statistics): each (sample, channel) plane is normalized
    with its own mean and variance over (H, W)."""

    def __init__(self, num_features: int):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inorm(x)


# 112 x 64 x 512 x 512 fp32 (the published size): 7 GiB read, 7 GiB written; 7168 planes of 256K
# elements (1 MiB) each.
batch_size = 112
features = 64
dim1 = 512
dim2 = 512

small_batch_size = 3
small_features = 5
small_dim1 = 17
small_dim2 = 19


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_features, small_dim1, small_dim2)]


def get_small_init_inputs():
    return [small_features]
