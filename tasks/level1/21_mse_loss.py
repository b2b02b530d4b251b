import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Mean squared error between predictions and targets."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(predictions, targets)


# Two 4096 x 16384 fp32 tensors (512 MiB read) reduced to one scalar.
batch_size = 4096
dim = 16384

small_batch_size = 5
small_dim = 1237


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_batch_size, small_dim), torch.randn(small_batch_size, small_dim)]
