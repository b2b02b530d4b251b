"""Which of memory's kernels a whole-model run takes for a region without searching it, and which the
torch.compile backend swaps in (graphs/model.region_kernels, a real Chroma store in a temp folder)."""

from __future__ import annotations

from pathlib import Path

from kernelwright.graphs.model import region_kernels
from kernelwright.memory import Case
from kernelwright.nodes import resources
from kernelwright.tasks.task import TaskSignature

SIG = "ab12"


def _memory_with(tmp_path: Path, *cases: tuple[str, str, float | None, float | None, bool]) -> object:
    memory = resources.open_shared_memory(tmp_path / "memory")
    for code, hardware, speedup, floor, correct in cases:
        memory.cases.add(
            Case(
                task_name=f"region_{SIG}",
                signature=TaskSignature(),
                code=code,
                correct=correct,
                hardware=hardware,
                speedup=speedup,
                fraction_of_floor=floor,
            )  # fmt: skip
        )
    return memory


def test_on_a_gpu_only_a_kernel_at_its_roofline_stop_is_taken_without_a_search(tmp_path: Path) -> None:
    memory = _memory_with(
        tmp_path,
        ("fast_far", "h200", 3.0, 0.5, True),  # fastest, but a search would go on from it
        ("at_floor", "h200", 2.0, 0.93, True),
        ("wrong_at_floor", "h200", 9.0, 0.99, False),
        ("other_gpu", "h100", 2.5, 0.97, True),
    )
    assert region_kernels(memory, "h200").get(SIG) == "fast_far"  # the CPU's rule: correct, fastest
    assert region_kernels(memory, "h200", at_floor=0.9).get(SIG) == "at_floor"
    assert region_kernels(memory, "h200", at_floor=0.95).get(SIG) is None
    assert region_kernels(memory, "h100", at_floor=0.95).get(SIG) == "other_gpu"
    assert region_kernels(memory, "h200").get("other") is None


def test_the_backend_on_a_gpu_swaps_in_only_a_kernel_measured_faster_than_torch(tmp_path: Path) -> None:
    memory = _memory_with(
        tmp_path,
        ("slower", "h200", 0.8, None, True),
        ("untimed", "h200", None, None, True),
    )
    assert region_kernels(memory, "h200").get(SIG) in {"slower", "untimed"}
    assert region_kernels(memory, "h200", faster=True).get(SIG) is None
    memory.cases.add(Case(task_name=f"region_{SIG}", signature=TaskSignature(), code="faster", correct=True,
                          hardware="h200", speedup=1.3))  # fmt: skip
    assert region_kernels(memory, "h200", faster=True).get(SIG) == "faster"
