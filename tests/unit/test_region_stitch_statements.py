"""A kernel file's statements renamed and unparsed once per text (tasks/region_stitch.py `prefixed_kernel`):
the stitched code is what renaming and unparsing the whole file gives, for any prefix, whatever was asked
before it, and for a file the per-statement path does not take (carriage returns)."""

from __future__ import annotations

import ast

import pytest

from kernelwright.tasks import region_stitch
from kernelwright.tasks.region_stitch import StitchError, prefixed_kernel

_KERNEL = '''"""A region's program."""
from __future__ import annotations
import torch
import torch.nn as nn
import triton
import triton.language as tl
SCALE = 2.0
_A, _B = 1, 2


def _cdiv(a, b):
    return (a + b - 1) // b


@triton.jit
def _k1(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) * SCALE, mask=i < n)


def _launch(x):
    """Launches _k1."""
    n = x.numel()
    _k1[(_cdiv(n, 128),)](x, n, BLOCK=128)
    return x


class ModelNew(nn.Module):
    def forward(self, x):
        text = "ModelNew _cdiv \\x00 '\\t'"
        return _launch(x) + _A + len(text)  # a comment
a = 1; b = a + _B
'''


def _whole(code: str, prefix: str) -> tuple[str, str]:
    tree = region_stitch._without_future(ast.parse(code))
    names = {n: f"{prefix}{n}" for n in region_stitch._top_level_names(tree) if not n.startswith("__")}
    return ast.unparse(region_stitch._Rename(names).visit(tree)), names["ModelNew"]


_VARIANTS = [
    _KERNEL,
    _KERNEL.replace("@triton.jit\n", "@triton.jit(do_not_specialize=['n'])\n"),  # same body, other decorator
    _KERNEL.replace("SCALE", "SCALE2"),  # a helper that reads another top-level name
    _KERNEL.replace("def _cdiv", "def cdiv_").replace("_cdiv(n", "cdiv_(n"),  # _cdiv no longer top-level
    _KERNEL.replace('"""A region\'s program."""\n', ""),  # no docstring: an import first
    '"""Docstring."""\nx = "\\n".join(["a"])\nclass ModelNew:\n    pass\n"""Not a docstring."""\n',
]


@pytest.mark.parametrize("index", range(len(_VARIANTS)))
def test_same_as_renaming_the_whole_file(index: int) -> None:
    for prefix in ("_r0123456789_", "_rabcdef0123_", "_r0123456789_"):
        for code in _VARIANTS[index:] + _VARIANTS[:index]:  # every order: cached statements of others first
            assert prefixed_kernel(code, prefix) == _whole(code, prefix)


def test_files_renamed_whole() -> None:
    code = _KERNEL.replace("\n", "\r\n")
    assert prefixed_kernel(code, "_rX_") == _whole(code, "_rX_")


def test_errors() -> None:
    with pytest.raises(StitchError):
        prefixed_kernel("class Model:\n    pass\n", "_rX_")
    with pytest.raises(StitchError):
        prefixed_kernel("def f(:\n", "_rX_")
    with pytest.raises(StitchError):  # Python code holds no NUL character: never the marker's
        prefixed_kernel(_KERNEL.replace("a = 1;", "a = '\x00';"), "_rX_")
