"""Test task: noise from the operating system drawn in forward; no seed repeats it, so it cannot be verified
by value."""

import os

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        noise = torch.tensor(list(os.urandom(x.numel())), dtype=x.dtype, device=x.device).reshape(x.shape)
        return x + noise / 255


def get_inputs():
    return [torch.randn(4, 33)]


def get_init_inputs():
    return []
