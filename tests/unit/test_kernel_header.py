"""providers.protocol.KernelHeader: the one writer and reader of a kernel's `# kernelwright:` line."""

from __future__ import annotations

import pytest

from kernelwright.providers.protocol import HEADER_PREFIX, KernelHeader, header_line


def test_render_then_parse_gives_the_header_back() -> None:
    h = KernelHeader("matmul", "split_k", {"BLOCK_M": "64", "SPLIT_K": "8", "PREC": "ieee"})
    line = h.render()
    assert line == "# kernelwright: family=matmul design=split_k config=BLOCK_M=64,SPLIT_K=8,PREC=ieee"
    back = KernelHeader.parse(line + "\nimport torch\n")
    assert back == h and back is not None and back.line == line
    assert list(back.config) == ["BLOCK_M", "SPLIT_K", "PREC"]  # the order as written
    assert back.body == "family=matmul design=split_k config=BLOCK_M=64,SPLIT_K=8,PREC=ieee"
    assert KernelHeader.parse(back.render()) == back


def test_of_shows_config_values_as_the_writer_formats_them() -> None:
    h = KernelHeader.of("conv", "implicit_gemm", {"BLOCK_M": 64, "DOT": "ieee", "FLAT": True})
    assert h.config == {"BLOCK_M": "64", "DOT": "ieee", "FLAT": "True"}
    assert h.render().endswith("config=BLOCK_M=64,DOT=ieee,FLAT=True")
    empty = KernelHeader.of("pointwise", "flat", {})
    assert empty.render() == "# kernelwright: family=pointwise design=flat config="
    assert KernelHeader.parse(empty.render()) == empty
    assert empty.body == "family=pointwise design=flat config="


@pytest.mark.parametrize(
    "text,expected",
    [
        # blank lines and leading whitespace before the header
        ("\n\n   # kernelwright: family=norm design=rows config=TILE=4096\n", ("norm", "rows", {"TILE": "4096"})),
        # no space after "#", spaces after config commas (LLM answers)
        ("#kernelwright: family=mm design=tiled config=BLOCK_M=64, BLOCK_N=32,GROUP_M=8",
         ("mm", "tiled", {"BLOCK_M": "64", "BLOCK_N": "32", "GROUP_M": "8"})),
        # missing config, missing family, fields out of order
        ("# kernelwright: family=x design=y", ("x", "y", {})),
        ("# kernelwright: design=rowwise_softmax", ("", "rowwise_softmax", {})),
        ("# kernelwright: config=BLOCK=128 design=flat family=pointwise", ("pointwise", "flat", {"BLOCK": "128"})),
        # family and design are one word; a config part without "=" is skipped
        ("# kernelwright: family=softmax design=online two-pass config=BLOCK_R=2048,junk",
         ("softmax", "online", {"BLOCK_R": "2048"})),
        # an empty config
        ("# kernelwright: family=norm design=d config=", ("norm", "d", {})),
    ],
)  # fmt: skip
def test_parse_is_tolerant_of_what_real_headers_look_like(text: str, expected: tuple) -> None:
    h = KernelHeader.parse(text)
    assert h is not None and (h.family, h.design, h.config) == expected


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "import torch",
        "import triton\n# kernelwright: family=x design=y config=",  # only the first non-empty line counts
        "# kernelwright: a kernel",  # a marker that names no field
        "x = 1  # kernelwright: family=x design=y",
    ],
)
def test_parse_gives_none_without_a_header(text: str | None) -> None:
    assert KernelHeader.parse(text) is None
    assert header_line(text) is None


def test_header_line_is_the_line_as_written() -> None:
    code = "\n  # kernelwright:  family=a design=b config=K=1  \nimport torch\n"
    assert header_line(code) == "# kernelwright:  family=a design=b config=K=1"
    assert header_line(code) == KernelHeader.parse(code).line  # type: ignore[union-attr]
    assert HEADER_PREFIX == "# kernelwright:"


def test_find_reads_a_header_anywhere_with_or_without_its_hash() -> None:
    # The context builder shows a case's header without the "#" ("design: kernelwright: ...").
    case = "task: t (softmax)\ndesign: kernelwright: family=softmax design=online config=BLOCK_R=2048\ncode:\n..."
    h = KernelHeader.find(case)
    assert h is not None and (h.family, h.design, h.config) == ("softmax", "online", {"BLOCK_R": "2048"})
    # a design section's child: attributes first, then the program
    design = (
        ' id="n3" speedup="1.20">\n# kernelwright: family=mm design=tiled config=BLOCK_M=64\nimport torch'
    )
    assert KernelHeader.find(design) == KernelHeader("mm", "tiled", {"BLOCK_M": "64"})
    # a marker without fields is passed over for the header after it
    assert KernelHeader.find("kernelwright: notes\n# kernelwright: family=a design=b config=").design == "b"  # type: ignore[union-attr]
    assert KernelHeader.find("import torch") is None and KernelHeader.find(None) is None


def test_the_offline_policy_and_the_conv_writer_read_the_same_grammar() -> None:
    from kernelwright.providers.offline import parse_meta
    from kernelwright.providers.offline.families.conv.conv import parse_conv_header

    line = "# kernelwright: family=conv design=implicit_gemm config=BLOCK_M=64, BLOCK_N=32"
    m = parse_meta(line)
    assert m is not None and m.config == {"BLOCK_M": "64", "BLOCK_N": "32"}
    assert parse_meta("# kernelwright: design=flat") is None  # the policy needs a family and a design
    assert parse_conv_header("# kernelwright: family=pointwise design=flat config=") is None


def test_kept_as_torch_and_beside_torch_phrases_round_trip() -> None:
    """The docstring phrase a program uses for the ops it left to torch, and the rule qualifier made from it,
    read back by the reflector (`kept_torch_call`, only an op the program really calls) and the policy."""
    from kernelwright.nodes.reflector import kept_torch_call
    from kernelwright.providers.offline.choice.context import parse_rules
    from kernelwright.providers.protocol import (
        beside_torch,
        beside_torch_op,
        kept_as_torch,
        kept_as_torch_line,
    )

    line = kept_as_torch_line(["max_pool3d", "conv2d"])
    assert kept_as_torch(f'"""cuDNN + epilogue; {line}."""') == ["max_pool3d", "conv2d"]
    assert kept_as_torch("no such line") == []
    program = f'"""{line}."""\ny = torch.nn.functional.conv2d(x, w)\n'
    assert kept_torch_call(program) == "conv2d"  # max_pool3d is named but never called
    rule = (
        f"You cannot use design=flat with BLOCK=1024 for pointwise {beside_torch('conv2d')} on h200: mismatch"
    )
    assert beside_torch_op(rule) == "conv2d" and beside_torch_op("You cannot use design=flat") is None
    assert [r.beside for r in parse_rules(f"- {rule}\n- You cannot use design=flat", {"BLOCK"})] == [
        "conv2d",
        None,
    ]
