"""Test task: noise from torch's RNG drawn in forward (as level3/35 draws its LSTM's initial state): verified
with both forwards seeded alike, so a candidate that draws the same numbers matches."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)


def get_inputs():
    return [torch.randn(4, 33)]


def get_init_inputs():
    return []
