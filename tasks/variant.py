"""A task at another floating-point dtype: the same model, its parameters, buffers and inputs in bf16 or fp16.

    dtype_variant(source, "bfloat16")   # the task's source, edited to run in that dtype

Real models run in bf16 (or fp16); KernelBench's tasks are fp32. The variant is the task's own text with
three small edits, so that it reads as before and so that writers which copy parts of a task (its
`Model.__init__`, its helpers) copy the dtype too:

- `Model.__init__` ends with `self.to(torch.<dtype>)` (parameters and buffers; a Model without an
  `__init__` has none);
- `get_inputs` (and `get_small_inputs`) are renamed `_fp32_get_inputs` (...), and new ones return their
  floating-point tensors in the dtype; integer and bool inputs (labels, indices, masks) are left alone;
- a comment says so.

The bundled suites level1_bf16 and level2_bf16 are written by this (`kernelwright tasks variant`); a test
checks that they still are.
"""

from __future__ import annotations

import ast

from kernelwright.tasks.pyast import parse_python

DTYPES = {"bfloat16": "bf16", "float16": "fp16"}
"""The dtypes a variant can take, with their short names."""

_INPUTS = ("get_inputs", "get_small_inputs")


def dtype_variant(source: str, dtype: str) -> str:
    """`source` (a KernelBench-format task) with its model and inputs in `dtype` ("bfloat16" or "float16")."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    try:
        tree = parse_python(source)
    except SyntaxError as exc:
        raise ValueError(f"the task does not parse: {exc.msg} (line {exc.lineno})") from None
    top = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    missing = [name for name in ("Model", "get_inputs") if name not in top]
    if missing:
        raise ValueError(f"not a task: no top-level {' or '.join(missing)}")
    if any(f"_fp32_{name}" in top for name in _INPUTS):
        raise ValueError("the task is a dtype variant already")
    lines = source.rstrip("\n").split("\n")
    model = top["Model"]
    assert isinstance(model, ast.ClassDef)
    init = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    renamed = [name for name in _INPUTS if name in top]
    # Edits from the bottom up, so that earlier line numbers stay right.
    edits: list[tuple[int, str | None, str]] = []  # (0-based line, text to insert after it or None, rename)
    if init is not None:
        last = init.body[-1]
        indent = " " * last.col_offset
        edits.append((last.end_lineno - 1, f"{indent}self.to(torch.{dtype})", ""))  # type: ignore[operator]
    for name in renamed:
        edits.append((top[name].lineno - 1, None, name))
    for line, insert, name in sorted(edits, key=lambda e: e[0], reverse=True):
        if insert is not None:
            lines.insert(line + 1, insert)
        else:
            lines[line] = lines[line].replace(f"def {name}(", f"def _fp32_{name}(", 1)
    tail = [
        "",
        "",
        f"# The {DTYPES[dtype]} variant of this task: the model's parameters and buffers (Model.__init__ ends in",
        f"# self.to) and the floating-point inputs in torch.{dtype}; sizes as above, each such tensor half the",
        "# bytes.",
        "def _in_dtype(values):",
        f"    return [v.to(torch.{dtype}) if isinstance(v, torch.Tensor) and v.is_floating_point() else v"
        " for v in values]",
    ]
    for name in renamed:
        tail += ["", "", f"def {name}():", f"    return _in_dtype(_fp32_{name}())"]
    return "\n".join(lines + tail) + "\n"
