"""The offline writer's programs define every name they read.

A torch call kept in the program (a concatenation, an einsum) takes its tensors in a list. A value only
reached through such a list (a parameter's `expand`, an operand's slice) was dropped from the writer's graph
as unused, so the program read `t2` or `t4` and raised NameError (level3/28's class token, the Mamba2
einsum of level3/48). Each pattern here is written and judged by the real harness on CPU; and a program
that would still read an undefined name is refused with its reason, never written.
"""

from __future__ import annotations

import ast

import pytest

from kernelwright.hardware import EvalConfig, WorkerPool
from kernelwright.providers.offline import write_program
from kernelwright.providers.offline.emit.emit_module import UndefinedNameError, check_forward_names
from kernelwright.tasks import load_task_source
from tests.fakes.writer import check_programs, writer_prompt

CFG = EvalConfig(device="cpu", time=False, timeout=300, trials=3, second_shape=False)

# level3/28 (ViT): the class token, a parameter broadcast over the batch, concatenated before the patches.
EXPANDED_PARAMETER_IN_CAT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))

    def forward(self, x):
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        return torch.cat((cls, x), dim=1) * 2.0


def get_inputs():
    return [torch.randn(3, 5, 12)]


def get_init_inputs():
    return [12]
"""

# level3/48 (Mamba2): an einsum whose operand is a slice of an input and another an exp, then a residual.
SLICED_EINSUM_OPERAND = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x0, x1, x2, x3):
        t0 = x0[:, :-1]
        t1 = torch.exp(x1)
        t2 = torch.einsum('bclhn,bchpn,bhcl->bclhp', x2, t0, t1)
        return x3 + t2


def get_inputs():
    return [
        torch.randn([2, 4, 3, 2, 5]),
        torch.randn([2, 3, 3, 7]),
        torch.randn([2, 3, 7, 3, 5]),
        torch.randn([2, 3, 7, 3, 2]),
    ]


def get_init_inputs():
    return []
"""

TASKS = {
    "expanded_parameter_in_cat": EXPANDED_PARAMETER_IN_CAT,
    "sliced_einsum_operand": SLICED_EINSUM_OPERAND,
}


def _write(source: str) -> str:
    answer = write_program(writer_prompt(source))
    assert answer.code is not None, answer.explanation
    return answer.code


def _undefined_in_forward(code: str) -> list[str]:
    """Names `ModelNew.forward` reads that neither it, its arguments nor the module define (independently of
    the writer's own check: the names the program assigns anywhere at module or forward level)."""
    tree = ast.parse(code)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    fwd = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    defined = stored | {a.arg for a in fwd.args.args} | {n.name for n in tree.body if hasattr(n, "name")}
    reads = {n.id for n in ast.walk(fwd) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return sorted(r for r in reads if r.startswith("t") and r[1:].isdigit() and r not in defined)


@pytest.mark.parametrize("name", TASKS)
def test_a_value_passed_in_a_list_is_defined(name: str) -> None:
    code = _write(TASKS[name])
    assert _undefined_in_forward(code) == [], code


def test_programs_with_listed_operands_are_correct(pool: WorkerPool) -> None:
    jobs = [(name, load_task_source(src, name), _write(src)) for name, src in TASKS.items()]
    check_programs(pool, jobs, CFG)


def test_a_forward_reading_an_undefined_name_is_refused() -> None:
    program = "import torch\n\n\nclass ModelNew:\n    def forward(self, x):\n        t1 = x + 1\n        return t1 + t4\n"
    with pytest.raises(UndefinedNameError, match="t4"):
        check_forward_names(program)
    # names defined before their use, module-level names, builtins and a comprehension's own are fine
    check_forward_names(
        "import torch\nK = 2\n\n\nclass ModelNew:\n    def forward(self, x):\n"
        "        t1 = torch.relu(x) * K\n        return [t1 + i for i in range(len(t1))]\n"
    )
