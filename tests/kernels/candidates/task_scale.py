"""Test task: a learned per-column scale (a parameter the candidate must take from the reference)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return x * self.weight


def get_inputs():
    return [torch.randn(333, 77)]


def get_small_inputs():
    return [torch.randn(37, 77)]


def get_init_inputs():
    return [77]
