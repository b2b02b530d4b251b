"""Test task whose reference never finishes: the harness must blame itself, not the candidate."""

import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        time.sleep(600)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(7, 123, 301)]


def get_small_inputs():
    return [torch.randn(5, 123, 77)]


def get_init_inputs():
    return []
