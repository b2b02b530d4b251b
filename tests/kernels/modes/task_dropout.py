"""Test task: dropout after ReLU; random in train mode, deterministic in eval mode."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(torch.relu(x))


def get_inputs():
    return [torch.randn(4, 33)]


def get_init_inputs():
    return []
