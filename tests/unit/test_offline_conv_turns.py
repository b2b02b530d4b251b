"""The offline writer offers both approaches for a convolution task, so the search can measure them:
Triton's implicit-GEMM convolution and cuDNN with the following work fused into Triton."""

from __future__ import annotations

from kernelwright.providers.offline import write_program
from kernelwright.providers.protocol import render_section
from kernelwright.tasks import bundled_suite_dir

TASK = (bundled_suite_dir("level2") / "09_conv2d_bias_relu.py").read_text()


def family(code: str | None) -> str:
    assert code is not None
    header = code.splitlines()[0]
    assert header.startswith("# kernelwright: family="), header
    return header.split("family=")[1].split()[0]


def prompt(kind: str, parent: str | None = None, designs: list[str] = (), task: str = TASK) -> str:
    parts = [render_section("request", "write a kernel", kind=kind), render_section("task", task, name="t")]
    if parent:
        parts.append(render_section("parent", parent))
    if designs:
        parts.append(render_section("designs", "\n".join(f"<design>\n{d}\n</design>" for d in designs)))
    return "\n".join(parts)


def test_large_steps_alternate_between_triton_and_cudnn_convolutions():
    root = write_program(prompt("large_step")).code
    assert family(root) == "conv"
    other = write_program(prompt("large_step", parent=root, designs=[root])).code
    assert family(other) != "conv" and "torch.nn.functional.conv2d" in other  # cuDNN does the convolution
    # with a cuDNN program among the representatives, a large step from a Triton conv stays Triton
    again = write_program(prompt("large_step", parent=root, designs=[root, other])).code
    assert family(again) == "conv" and again != root
    # the root's next large step, with only Triton designs among the representatives, goes to cuDNN
    assert family(write_program(prompt("large_step", designs=[root])).code) != "conv"
    # from a cuDNN program, a large step comes back to a Triton convolution
    assert family(write_program(prompt("large_step", parent=other)).code) == "conv"


def test_small_steps_stay_with_the_parents_approach():
    root = write_program(prompt("large_step")).code
    other = write_program(prompt("large_step", parent=root, designs=[root])).code
    assert family(write_program(prompt("small_step", parent=root)).code) == "conv"
    assert family(write_program(prompt("small_step", parent=other)).code) == family(other)


def test_a_small_step_on_a_convolution_does_not_repeat_a_program_it_is_shown():
    root = write_program(prompt("large_step")).code
    assert root is not None
    first = write_program(prompt("small_step", parent=root)).code
    assert first is not None and family(first) == "conv"
    shown = prompt("small_step", parent=root) + "\n" + render_section("tried", first.splitlines()[0])
    second = write_program(shown).code
    assert second is not None and family(second) == "conv"
    assert second.splitlines()[0] != first.splitlines()[0]


def test_a_convolution_with_nothing_after_it_keeps_every_large_step_in_triton():
    # cuDNN alone would be the reference itself: the other approach has nothing to write, so the search's
    # later large steps are other Triton convolutions, never a step that ends the run as unsupported
    task = (bundled_suite_dir("published") / "34_conv2d_dilated_padded_8x32x512x512.py").read_text()
    root = write_program(prompt("large_step", task=task)).code
    assert family(root) == "conv"
    second = write_program(prompt("large_step", designs=[root], task=task)).code
    assert family(second) == "conv" and second.splitlines()[0] != root.splitlines()[0]
    third = write_program(prompt("large_step", parent=root, designs=[root, second], task=task)).code
    assert family(third) == "conv" and third.splitlines()[0] not in (
        root.splitlines()[0],
        second.splitlines()[0],
    )
