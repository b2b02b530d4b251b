"""Test task: BatchNorm then ReLU; forward updates running statistics in train mode."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(self.bn(x))


channels = 8


def get_inputs():
    return [torch.randn(4, channels, 9, 11)]


def get_init_inputs():
    return [channels]
