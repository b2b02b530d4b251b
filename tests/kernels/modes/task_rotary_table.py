"""Test task: a scale table the model computes in __init__ and keeps as a non-persistent buffer (as rotary
embeddings keep their cos/sin tables): not in the state_dict, so nothing the judge sends a candidate."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.register_buffer("table", torch.linspace(0.5, 1.5, width).cos(), persistent=False)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return self.proj(x) * self.table


def get_inputs():
    return [torch.randn(3, 5, 24)]


def get_init_inputs():
    return [24]
