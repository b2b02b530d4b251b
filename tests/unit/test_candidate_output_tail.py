"""What a verdict quotes of a crashed candidate's output (hardware/isolation/candidate_process.output_tail)."""

from __future__ import annotations

import os

from kernelwright import IMPORT_ROOT
from kernelwright.hardware.isolation.candidate_process import output_tail


def _crash_log(private: str, callers: int) -> str:
    frames = [f'  File "{os.path.join(private, "candidate.py")}", line 21 in forward']
    frames += [
        f'  File "{os.path.join(IMPORT_ROOT, "hardware", "candidate", "guard.py")}", line {100 + i} in call_{i}'
        for i in range(callers)
    ]
    frames.append('  File "<frozen runpy>", line 198 in _run_module_as_main')
    return (
        "a line the candidate printed\n"
        "Fatal Python error: Aborted\n\nCurrent thread 0x00007f (most recent call first):\n"
        + "\n".join(frames)
        + "\n\nExtension modules: numpy.core._multiarray_umath, torch._C (total: 2)\n"
    )


def test_a_long_crash_stack_is_quoted_from_its_failing_frame() -> None:
    private = "/tmp/a-rather-long-private-folder-name-for-one-candidate/job"
    text = output_tail(_crash_log(private, callers=60), private, limit=1500)
    assert len(text) <= 1500
    assert text.startswith("Fatal Python error: Aborted")
    assert 'candidate.py", line 21 in forward' in text  # the frame a tail of the output would have cut
    assert IMPORT_ROOT not in text and "hardware/candidate/guard.py" in text
    assert "Extension modules" not in text


def test_a_short_output_is_its_end() -> None:
    private = "/tmp/job"
    log = _crash_log(private, callers=2)
    text = output_tail(log, private, limit=1500)
    assert text.startswith("a line the candidate printed") and text.endswith("_run_module_as_main")
    plain = "x" * 2000 + "\nthe last line"
    assert output_tail(plain, private, limit=100).endswith("the last line")
    assert len(output_tail(plain, private, limit=100)) == 100
