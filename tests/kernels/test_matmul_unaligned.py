"""A 3xTF32 matmul program run at sizes that are not multiples of 16 (sizes other than the traced one).

Compiled for an H200 without a GPU (hardware/compile/feedback.compile_for_target, launches captured at the
full size): with 64-wide K steps that specialization spilled 788 B per thread, so the launcher takes 32-wide
steps there and keeps 64 where the sizes are aligned. Timing is a benchmark's (benchmarks/RESULTS.md).
"""

from __future__ import annotations

from kernelwright.hardware.compile.feedback import compile_for_target
from kernelwright.providers.offline.writer import write_program
from kernelwright.tasks import bundled_suite_dir
from kernelwright.tasks.resize import with_sizes
from tests.fakes.writer import writer_prompt


def test_the_traced_program_does_not_spill_at_an_unaligned_size() -> None:
    source = (bundled_suite_dir("level1") / "14_matmul_square.py").read_text()
    program = write_program(writer_prompt(source)).code  # written at the traced 8192^2
    assert "PREC=tf32x3" in program.splitlines()[0]
    seen = {}
    for n in (1024, 1000):
        report = compile_for_target(program, with_sizes(source, {"N": n}), shapes="full", timeout_s=300)
        assert report.ok, report.summary()
        (kernel,) = report.kernels
        seen[n] = (kernel.constexprs["BLOCK_K"], kernel.spills)
    assert seen == {1024: (64, False), 1000: (32, False)}
