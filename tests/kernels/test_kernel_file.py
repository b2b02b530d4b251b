"""kernel.py as a user meets it outside kernelwright: a plain module that runs on a CPU-only machine when
its header's instruction (TRITON_INTERPRET=1 before Triton is imported) is followed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from kernelwright import IMPORT_ROOT
from kernelwright.nodes.finalize import KERNEL_FILE, write_outputs
from kernelwright.nodes.records import BestKernel, OptimizeResult
from tests.fakes.kernels import relu_kernel

# A user's script: the reference and the written kernel on the same odd-sized CPU input.
USE = textwrap.dedent(
    """
    import importlib.util, sys, torch
    spec = importlib.util.spec_from_file_location("kernel", sys.argv[1])
    kernel = importlib.util.module_from_spec(spec); spec.loader.exec_module(kernel)
    x = torch.randn(3, 517)
    out = kernel.ModelNew()(x)
    assert torch.equal(out, torch.relu(x)), "wrong values"
    print("ok")
    """
)


def _run(path: Path, interpret: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # as on a machine without a GPU
    env["PYTHONPATH"] = IMPORT_ROOT
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return subprocess.run(
        [sys.executable, "-c", USE, str(path)], env=env, capture_output=True, text=True, timeout=120
    )


def test_kernel_file_header_says_how_to_run_it_on_a_cpu_and_that_works(tmp_path: Path) -> None:
    result = OptimizeResult(
        task="01_relu",
        run_id="0" * 32,
        run_dir=str(tmp_path),
        correct=True,
        verdict="Found a correct Triton kernel (n1); its speed is unknown: CPU.",
        best=BestKernel(node_id="n1", code=relu_kernel()),
        device="cpu",
    )
    write_outputs(result, tmp_path)
    path = tmp_path / KERNEL_FILE
    header = "\n".join(line for line in path.read_text().splitlines() if line.startswith("#"))
    assert "TRITON_INTERPRET=1" in header and "before triton is" in header
    done = _run(path, interpret=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    # What the header warns of: without it Triton wants a GPU and the launch fails.
    failed = _run(path, interpret=False)
    assert failed.returncode != 0 and "ok" not in failed.stdout
