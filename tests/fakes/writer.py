"""Helpers for tests of the offline writer: its prompts, verifying its programs, importing one."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelwright.providers.protocol import render_section
from tests.fakes.warm_python import run_python


def writer_prompt(source: str, kind: str = "large_step", **sections: str) -> str:
    """A coder prompt as the context manager lays it out: request, task, then the sections given."""
    parts = [
        render_section("request", "Write a faster kernel.", kind=kind),
        render_section("task", source, name="t"),
    ]
    parts += [render_section(tag, body) for tag, body in sections.items()]
    return "\n\n".join(parts)


def first_programs_stitched(source: str) -> tuple[Any, dict[int, tuple[str, str]], list[str], str]:
    """A KernelBench-format model split into regions, each region signature given the writer's first program,
    and stitched: (the split, region index -> (signature, program), the writer's refusals, the stitched file's
    text)."""
    from kernelwright.providers.offline import write_program
    from kernelwright.tasks import exec_task_module
    from kernelwright.tasks.region_stitch import stitched_source
    from kernelwright.tasks.regions import split_model

    task = exec_task_module(source, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs(), measure=False)
    kernels: dict[int, tuple[str, str]] = {}
    refused: list[str] = []
    for signature, regions in split.unique().items():
        if regions[0].source:
            answer = write_program(writer_prompt(regions[0].source))
            if answer.code is None:
                refused.append(str(answer.explanation))
            else:
                kernels.update({r.index: (signature, answer.code) for r in regions})
    plans = [r.plan() for r in split.regions]
    return split, kernels, refused, stitched_source(source, split.leaves, plans, kernels, spec=split.spec)


LOAD_AS_MODULE = """
import json, types
import torch

def load(text, name):
    module = types.ModuleType(name)
    module.__dict__["__file__"] = name + ".py"
    exec(compile(text, name + ".py", "exec"), module.__dict__)
    module._num_sms = lambda device: 132
    return module
"""
"""The head of a script for run_interpreted: `load(text, name)` executes a program's or task's source as a module
whose `_num_sms` answers 132 (an H100's SMs; a program asks the device at run time). No braces: a script that
`.format`s its own text appends it after this."""


def run_interpreted(program: str, timeout: float) -> list[str]:
    """Run `program` (Python source) in a process of its own under Triton's interpreter (TRITON_INTERPRET=1), so
    its kernels run on the CPU and nothing it imports or patches reaches the test process; its stdout lines.
    Fails the test with the end of its stderr if it exits non-zero. The process is a fork of a parent that has
    imported only torch and Triton (tests.fakes.warm_python), or a cold `python -c` where it must be."""
    out = run_python(["-c", program], env=dict(os.environ, TRITON_INTERPRET="1"), timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()


def loop_variables_reassigned(code: str) -> list[str]:
    """Loops in a written program whose body assigns the loop's own variable: inside the loop the name no longer
    holds the loop's value (the looped row kernels named their chunk start r0, as a row's first index is named,
    and batch norm's Welford steps read the index: wrong wherever a row takes more than one chunk)."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            name = node.target.id
            stores = [n for part in node.body for n in ast.walk(part)
                      if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)]  # fmt: skip
            if stores:
                found.append(f"line {node.lineno}: `for {name} in ...` assigns {name} in its body")
    return found


def check_programs(pool: Any, jobs: list[tuple[str, object, str]], cfg: Any) -> None:
    """Evaluate (label, task, program) jobs together; fail with every mismatch listed, and with every loop
    that assigns its own variable (loop_variables_reassigned), whatever the verdict at the test's size."""
    shadowed = [f"{label}: {w}" for label, _, code in jobs for w in loop_variables_reassigned(code)]
    assert not shadowed, "\n".join(shadowed)
    results = pool.evaluate_many([(task, code) for _, task, code in jobs], cfg)
    # A harness error is never the candidate's fault (e.g. CPython 3.11's ast is not thread-safe when the
    # static checks of several jobs run at once): evaluate those once more, one at a time.
    results = [
        pool.evaluate(task, code, cfg) if r.error_kind == "harness_error" else r
        for (_, task, code), r in zip(jobs, results, strict=True)
    ]
    bad = [
        f"{label}: {r.summary()}\n{(r.error or '')[-800:]}"
        for (label, _, _), r in zip(jobs, results, strict=True)
        if not r.correct
    ]
    assert not bad, "\n\n".join(bad)


def import_program(code: str, path: Path) -> ModuleType:
    """A program written to `path` and imported (Triton's @jit needs its source in a file)."""
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Runs each (task, program) pair beside the task's Model under Triton's interpreter, recording every launch of
# the program's module-level kernels whose names match a pattern (name, and the launch keywords asked for); one
# process for all of them (importing torch and Triton is most of a run's time).
_BESIDE_MODEL = """
import importlib.util, json, os, re, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

class Record:
    def __init__(self, launches, name, fn):
        self.launches, self.name, self.fn = launches, name, fn
    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append([self.name, *(kwargs.get(k) for k in spec["keywords"])])
            return self.fn[grid](*args, **kwargs)
        return launch

spec = json.loads(open(sys.argv[1]).read())
out = {}
for job, (task_path, program_path) in spec["jobs"].items():
    task, program = load(task_path, "task_" + job), load(program_path, "program_" + job)
    launches = []
    for name in [n for n in vars(program) if re.match(spec["kernels"], n)]:
        setattr(program, name, Record(launches, name, getattr(program, name)))
    torch.manual_seed(0)
    ref = task.Model(*task.get_init_inputs())
    new = program.ModelNew(*task.get_init_inputs())
    new.load_state_dict(ref.state_dict())
    inputs = task.get_inputs()
    want, got = ref(*inputs).float(), new(*inputs).float()
    out[job] = {"launches": launches, "err": (want - got).abs().max().item(), "scale": want.abs().max().item()}
print(json.dumps(out))
"""


def run_beside_model(
    root: Path,
    programs: dict[str, tuple[str, str]],
    kernels: str,
    keywords: tuple[str, ...] = ("W_TMA", "X_TMA"),
) -> dict[str, list]:
    """Each program (name -> (task source, program)) run on the task's inputs under the interpreter, in one
    process (tests.fakes.warm_python); its output checked against the task's Model (fp16 tolerance). name -> the launches of the
    kernels whose names match the regex `kernels`, in order: [kernel name, then its `keywords` or None]."""
    jobs = {}
    for name, (source, code) in programs.items():
        (root / f"task_{name}.py").write_text(textwrap.dedent(source))
        (root / f"program_{name}.py").write_text(code)
        jobs[name] = [str(root / f"task_{name}.py"), str(root / f"program_{name}.py")]
    (root / "jobs.json").write_text(
        json.dumps({"jobs": jobs, "kernels": kernels, "keywords": list(keywords)})
    )
    (root / "beside_model.py").write_text(_BESIDE_MODEL)
    # (the script sets TRITON_INTERPRET itself before it imports torch; set here too, it runs in a fork of the
    # warm parent, which imported torch and Triton with it)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = run_python(["beside_model.py", "jobs.json"], env=env, timeout=240, cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, r in out.items():
        assert r["err"] <= 2e-2 * max(1.0, r["scale"]), (name, r)
    return {name: r["launches"] for name, r in out.items()}
