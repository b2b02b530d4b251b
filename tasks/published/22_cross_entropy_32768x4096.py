import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Mean cross-entropy of logits against integer class targets."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(predictions, targets)


# 32768 rows of 4096 classes fp32 (the published size): 512 MiB of logits and 256 KiB of int64 targets
# read, one scalar written.
batch_size = 32768
num_classes = 4096

small_batch_size = 13
small_num_classes = 1001


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []


def get_small_inputs():
    return [
        torch.randn(small_batch_size, small_num_classes),
        torch.randint(0, small_num_classes, (small_batch_size,)),
    ]
