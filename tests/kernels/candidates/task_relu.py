"""Test task: ReLU over an odd-shaped 3-d tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(7, 123, 301)]


def get_small_inputs():
    return [torch.randn(5, 123, 77)]


def get_init_inputs():
    return []
