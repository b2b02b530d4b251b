"""The conv programs' channels-last copy (conv_runtime.NHWC_COPY) against torch's own, under the interpreter."""

from __future__ import annotations

import textwrap

from tests.fakes.writer import run_interpreted

PROGRAM = textwrap.dedent(
    """
    import torch, triton, triton.language as tl
    from kernelwright.providers.offline.families.conv.conv_runtime import HOST_HELPERS, NHWC_COPY
    from kernelwright.providers.offline.emit.emit import HELPERS

    ns = {"torch": torch, "triton": triton, "tl": tl}
    exec(compile(HELPERS["_kw_launch"] + HOST_HELPERS + NHWC_COPY, "conv_runtime", "exec"), ns)
    launches = []

    class Counted:  # the kernel as the helper looks it up, counting its launches
        def __getitem__(self, grid):
            launches.append(grid)
            return kernel[grid]

    kernel, ns["_kw_nhwc_kernel"] = ns["_kw_nhwc_kernel"], Counted()
    g = torch.Generator().manual_seed(0)
    base = torch.randn(3, 70, 1, 5, 13, generator=g)  # C = 70: two channel tiles, the second ragged
    inputs = {
        "nchw": base,
        "channel slice": base[:, 3:68],  # sample and channel strides not the packed ones
        "1-d": torch.randn(2, 9, 1, 1, 130, generator=g),  # 130 pixels: a ragged pixel tile
        "bf16": base.bfloat16(),
        "already channels-last": base.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3),
        "pixels strided": base[..., ::2],  # not a packed plane: torch's copy
    }
    for name, x in inputs.items():
        launches.clear()
        y = ns["_kw_nhwc"](x)
        want = x.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3)
        print(name, "|", int(torch.equal(y, x)), int(y.stride() == want.stride()), int(y.data_ptr() == x.data_ptr()), len(launches))
    """
)


def test_channels_last_copy_matches_torch_values_and_strides():
    lines = run_interpreted(PROGRAM, timeout=120)
    rows = dict(line.split(" | ") for line in lines)
    assert len(rows) == 6, lines
    for name, flags in rows.items():
        same_values, same_strides, in_place, launched = flags.split()
        assert same_values == "1" and same_strides == "1", (name, flags)
        # only an input already stored channels-last is passed through uncopied; a packed plane is
        # copied by the kernel, a strided one by torch
        assert (in_place == "1") == (name == "already channels-last"), (name, flags)
        kernel = name not in ("already channels-last", "pixels strided")
        assert launched == ("1" if kernel else "0"), (name, flags)
