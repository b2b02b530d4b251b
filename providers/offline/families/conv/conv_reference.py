"""What a conv program copies from the task's source: its imports, helpers and module constants, and
`Model` renamed to `ModelNew` with a forward that calls the generated launcher.
"""

from __future__ import annotations

import ast

from kernelwright.providers.offline.families.conv.conv_stages import ConvEmitError
from kernelwright.tasks.pyast import parse_python


class ReferenceParts:
    """What ModelNew takes from the task's source: imports, helpers, and Model.__init__ (renamed)."""

    _SKIP_FUNCTIONS = ("get_inputs", "get_init_inputs", "get_small_inputs", "get_small_init_inputs")

    def __init__(self, source: str) -> None:
        try:
            tree = parse_python(source)
        except SyntaxError as exc:
            raise ConvEmitError(f"the task source does not parse: {exc.msg}") from None
        self.imports: list[str] = []
        self.helpers: list[str] = []
        self.model: ast.ClassDef | None = None
        standard = {
            "import math",
            "import torch",
            "import torch.nn as nn",
            "import triton",
            "import triton.language as tl",
        }
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                text = ast.unparse(node)
                if text not in standard:
                    self.imports.append(text)
            elif isinstance(node, ast.ClassDef) and node.name == "Model":
                self.model = node
            elif isinstance(node, ast.ClassDef):
                self.helpers.append("\n" + ast.unparse(node) + "\n")
            elif isinstance(node, ast.FunctionDef) and node.name not in self._SKIP_FUNCTIONS:
                self.helpers.append("\n" + ast.unparse(node) + "\n")
        if self.model is None:
            raise ConvEmitError("the task source defines no Model class")
        self.forward: ast.FunctionDef | None = None
        for item in self.model.body:
            if isinstance(item, ast.FunctionDef) and item.name == "forward":
                self.forward = item
        # module-level constants the copied code reads (and the constants those read), in source order
        keep = [self.model] + [n for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)]
        used = set().union(*(_free_names(node) for node in keep))
        assigns = [n for n in tree.body if isinstance(n, ast.Assign)]
        chosen: set[int] = set()
        changed = True
        while changed:
            changed = False
            for i, node in enumerate(assigns):
                if i not in chosen and any(isinstance(t, ast.Name) and t.id in used for t in node.targets):
                    chosen.add(i)
                    used |= {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
                    changed = True
        self.helpers = [ast.unparse(assigns[i]) for i in sorted(chosen)] + self.helpers

    def model_new(self, forward_args: list[str]) -> str:
        assert self.model is not None
        cls = _RenameModel().visit(parse_python(ast.unparse(self.model)).body[0])
        assert isinstance(cls, ast.ClassDef)
        cls.name = "ModelNew"
        body = [
            item for item in cls.body if not (isinstance(item, ast.FunctionDef) and item.name == "forward")
        ]
        call_args = forward_args
        if self.forward is not None:
            fwd_args = ast.unparse(self.forward.args)
            # the reference's own parameter names (a region's task calls its input x0, not x)
            names = [a.arg for a in [*self.forward.args.posonlyargs, *self.forward.args.args]][1:]
            if len(names) >= len(forward_args):
                call_args = names[: len(forward_args)]
        else:
            fwd_args = ", ".join(["self", *forward_args])
        call = ", ".join(call_args)
        fwd = parse_python(f"def forward({fwd_args}):\n    return _kw_forward(self, {call})\n").body[0]
        cls.body = body + [fwd]
        cls.decorator_list = []
        return "\n" + ast.unparse(cls) + "\n"


def _free_names(node: ast.AST) -> set[str]:
    """Names a class or function reads without binding them itself (arguments, assignments)."""
    bound: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            bound.add(n.id)
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


class _RenameModel(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == "Model":
            return ast.copy_location(ast.Name(id="ModelNew", ctx=node.ctx), node)
        return node
