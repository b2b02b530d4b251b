"""On a real GPU (skipped without CUDA): the profiler's extra forward is thread-checked, CUDA graphs fail with
why, a dispatch-stack probe under a computed name trips, and an honest candidate keeps passing with its
private /dev holding only its own GPU's node. Run with `pytest tests/kernels/test_judge_gpu_holes.py -q`."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from kernelwright.hardware import WorkerPool  # noqa: E402
from kernelwright.tasks import load_task  # noqa: E402

HOSTILE = Path(__file__).parent / "hostile"
RELU = Path(__file__).resolve().parents[2] / "tasks" / "level1" / "01_relu.py"


def hostile(body: str) -> str:
    return (HOSTILE / "_kernel.txt").read_text() + "\n\n" + body


# Torch in a thread only while the profiler is on (the one call the profiler watches).
THREAD_WHEN_PROFILED = """
import threading


class ModelNew(nn.Module):
    def forward(self, x):
        out = relu(x)
        if torch.autograd.profiler._is_profiler_enabled:
            worker = threading.Thread(target=lambda: out.add_(0))
            worker.start()
            worker.join()
        return out
"""

GRAPH_REPLAY = """
class ModelNew(nn.Module):
    def forward(self, x):
        graph = getattr(torch.cuda, "CUDA" + "Graph")()
        with getattr(torch.cuda, "gr" + "aph")(graph):
            out = relu(x)
        graph.replay()
        return out
"""

OWN_GPU_ONLY = """
import os


class ModelNew(nn.Module):
    def forward(self, x):
        gpus = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())
        if len(gpus) != 1:
            raise RuntimeError(f"REPORT gpus={gpus} END")
        return relu(x)
"""


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(device="cuda", workers=1) as p:
        yield p


@pytest.fixture(scope="module")
def relu_task():
    return load_task(RELU)


def test_a_thread_only_in_the_profiled_forward_is_caught(pool, relu_task):
    res = pool.evaluate(relu_task, hostile(THREAD_WHEN_PROFILED))
    assert (res.correct, res.error_kind) == (False, "forbidden"), res.error
    assert "the profiled forward started 1 thread" in res.error, res.error


def test_cuda_graphs_fail_with_why(pool, relu_task):
    res = pool.evaluate(relu_task, hostile(GRAPH_REPLAY))
    assert (res.correct, res.error_kind) == (False, "forbidden"), res.error
    assert "CUDA graphs are not allowed in a candidate" in res.error, res.error


def test_an_honest_candidate_sees_only_its_own_gpu(pool, relu_task):
    res = pool.evaluate(relu_task, hostile(OWN_GPU_ONLY))
    if res.extra.get("confinement", {}).get("devices", "").startswith("the host's /dev"):
        pytest.skip("no private /dev on this host (no mount namespace)")
    assert res.correct, res.error
