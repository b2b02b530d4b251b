"""Forwards that return a dict subclass, as transformers' ModelOutput (an OrderedDict whose keys are attributes):
the task loads, a candidate returning the same class is judged key by key, and the judge reads such a dict
through dict's own methods, so no code of the candidate's class runs while its answer is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.hardware import WorkerPool
from kernelwright.tasks import load_task

HEADER = (Path(__file__).parent / "hostile" / "_kernel.txt").read_text()

OUTPUT_CLASS = '''
from collections import OrderedDict


class Output(OrderedDict):
    """As transformers' ModelOutput: an OrderedDict whose keys are also attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc
'''

TASK = (
    "import torch\nimport torch.nn as nn\n"
    + OUTPUT_CLASS
    + """

class Model(nn.Module):
    def forward(self, x):
        return Output(scores=torch.relu(x), shifted=torch.relu(x) + 1.0)


def get_inputs():
    return [torch.randn(5, 37)]


def get_init_inputs():
    return []
"""
)

HONEST = (
    OUTPUT_CLASS
    + """

class ModelNew(nn.Module):
    def forward(self, x):
        y = relu(x)
        return Output(shifted=y + 1.0, scores=y)  # keys in another order than the reference's
"""
)

LAZY = (
    OUTPUT_CLASS
    + '''

class Lazy(Output):
    """Holds placeholders and computes the answer with torch when asked for it."""

    def __getitem__(self, key):
        x = self.__dict__["x"]
        return torch.relu(x) + (1.0 if key == "shifted" else 0.0)

    def keys(self):
        return ["scores", "shifted"]

    def __iter__(self):
        return iter(self.keys())

    def items(self):
        return [(k, self[k]) for k in self.keys()]


class ModelNew(nn.Module):
    def forward(self, x):
        placeholder = relu(x) * 0.0
        out = Lazy(scores=placeholder, shifted=placeholder)
        out.__dict__["x"] = x
        return out
'''
)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    path = tmp_path_factory.mktemp("dict_subclass") / "model_output.py"
    path.write_text(TASK)
    return load_task(path)


def test_a_task_returning_a_dict_subclass_loads_with_its_outputs_in_key_order(task):
    assert [list(shape) for shape in task.signature.output_shapes] == [[5, 37], [5, 37]]


def test_a_candidate_returning_the_same_dict_subclass_is_judged_key_by_key(pool: WorkerPool, task):
    res = pool.evaluate(task, HEADER + "\n\n" + HONEST)
    assert res.correct, res.error
    wrong = pool.evaluate(task, HEADER + "\n\n" + HONEST.replace("y + 1.0, scores", "y + 2.0, scores"))
    assert not wrong.correct and wrong.error_kind == "mismatch", wrong.error
    assert "output 1" in wrong.error or "shifted" in wrong.error, wrong.error


def test_a_dict_subclass_is_read_for_what_it_holds_not_for_what_its_methods_say(pool: WorkerPool, task):
    """Its __getitem__, keys and items would compute the answer with torch after forward returned: the judge
    reads what the dict holds (zeros) and rejects it."""
    res = pool.evaluate(task, HEADER + "\n\n" + LAZY)
    assert not res.correct, res.error
    assert res.error_kind == "mismatch", res.error
