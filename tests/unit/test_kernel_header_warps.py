"""num_warps=0 in a kernel header means the writer derives the warps from the tile: written "auto"."""

from kernelwright.providers.protocol import KernelHeader


def test_num_warps_0_is_written_auto_and_read_back_as_0():
    line = KernelHeader.of("softmax", "row_registers", {"TILE": 4096, "num_warps": 0}).render()
    assert line.endswith("config=TILE=4096,num_warps=auto")
    parsed = KernelHeader.parse(line)
    assert parsed is not None and parsed.config == {"TILE": "4096", "num_warps": "0"}
    assert "num_warps=auto" in parsed.body
    # headers written before (num_warps=0) and explicit counts read as they did
    old = KernelHeader.parse("# kernelwright: family=norm design=row_registers config=num_warps=0")
    assert old is not None and old.config["num_warps"] == "0"
    assert KernelHeader.of("norm", "two_pass", {"num_warps": 8}).config["num_warps"] == "8"
