"""The bundled `published` suite: single ops at published benchmark sizes, each loadable without ever
allocating its full size, with a full-size signature that is exactly the published one, and small inputs
on which the reference computes what the task says it does."""

from __future__ import annotations

import itertools
import json
import math
import runpy
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from kernelwright.hardware.roofline import roofline_floor_ms
from kernelwright.tasks import (
    BUNDLED_SUITES,
    OP_FAMILIES,
    Task,
    TaskError,
    bundled_suite_dir,
    exec_task_module,
    load_suite,
    task_inputs,
    task_model,
)

REPO = Path(__file__).resolve().parents[2]
F32, I64, BOOL = "float32", "int64", "bool"
ITEMSIZE = {F32: 4, I64: 8, BOOL: 1}

ACT = [[4096, 393216]]
NCHW = [[112, 64, 512, 512]]
MID = [[128, 4096, 4095]]
SQ = [[32768, 32768]]
P1, P2, P3 = [[64, 192, 65536]], [[32, 64, 512, 512]], [[16, 32, 128, 128, 256]]

# name: (full-size input shapes, their dtypes, output shapes, a family the analysis must find, bytes of
# the full-size inputs written out by hand).
# fmt: off
PUBLISHED: dict[str, tuple[list[list[int]], list[str], list[list[int]], str, int]] = {
    "01_relu_4096x393216": (ACT, [F32], ACT, "pointwise", 6_442_450_944),
    "02_gelu_4096x393216": (ACT, [F32], ACT, "pointwise", 6_442_450_944),
    "03_silu_4096x393216": (ACT, [F32], ACT, "pointwise", 6_442_450_944),
    "04_sigmoid_4096x393216": (ACT, [F32], ACT, "pointwise", 6_442_450_944),
    "05_tanh_4096x393216": (ACT, [F32], ACT, "pointwise", 6_442_450_944),
    "06_softmax_4096x393216": (ACT, [F32], ACT, "softmax", 6_442_450_944),
    "07_log_softmax_4096x393216": (ACT, [F32], ACT, "softmax", 6_442_450_944),
    "08_batch_norm_64x64x512x512": ([[64, 64, 512, 512]], [F32], [[64, 64, 512, 512]], "norm", 4_294_967_296),
    "09_layer_norm_16x64x256x256": ([[16, 64, 256, 256]], [F32], [[16, 64, 256, 256]], "norm", 268_435_456),
    "10_rms_norm_112x64x512x512": (NCHW, [F32], NCHW, "reduction", 7_516_192_768),
    "11_instance_norm_112x64x512x512": (NCHW, [F32], NCHW, "norm", 7_516_192_768),
    "12_sum_middle_dim_128x4096x4095": (MID, [F32], [[128, 1, 4095]], "reduction", 8_587_837_440),
    "13_mean_middle_dim_128x4096x4095": (MID, [F32], [[128, 4095]], "reduction", 8_587_837_440),
    "14_max_middle_dim_128x4096x4095": (MID, [F32], [[128, 4095]], "reduction", 8_587_837_440),
    "15_min_middle_dim_128x4096x4095": (MID, [F32], [[128, 4095]], "reduction", 8_587_837_440),
    "16_argmax_middle_dim_128x4096x4095": (MID, [F32], [[128, 4095]], "reduction", 8_587_837_440),
    "17_cumsum_32768x32768": (SQ, [F32], SQ, "scan", 4_294_967_296),
    "18_cumprod_32768x32768": (SQ, [F32], SQ, "scan", 4_294_967_296),
    "19_reverse_cumsum_32768x32768": (SQ, [F32], SQ, "scan", 4_294_967_296),
    "20_masked_cumsum_32768x32768": (SQ + SQ, [F32, BOOL], SQ, "scan", 5_368_709_120),
    "21_l1_norm_32768x65535": ([[32768, 65535]], [F32], [[32768, 65535]], "reduction", 8_589_803_520),
    "22_cross_entropy_32768x4096": ([[32768, 4096], [32768]], [F32, I64], [[]], "loss", 537_133_056),
    "23_matmul_large_k_256x524288x256": ([[256, 524288], [524288, 256]], [F32, F32], [[256, 256]], "matmul",
                                         1_073_741_824),
    "24_matmul_irregular_8205x2949x5921": ([[8205, 2949], [2949, 5921]], [F32, F32], [[8205, 5921]], "matmul",
                                           166_630_296),
    "25_matmul_tall_skinny_32768x32": ([[32768, 32], [32, 32768]], [F32, F32], [[32768, 32768]], "matmul",
                                       8_388_608),
    "26_max_pool1d_64x192x65536": (P1, [F32], [[64, 192, 65523]], "pool", 3_221_225_472),
    "27_max_pool2d_32x64x512x512": (P2, [F32], [[32, 64, 511, 511]], "pool", 2_147_483_648),
    "28_max_pool3d_16x32x128x128x256": (P3, [F32], [[16, 32, 62, 62, 126]], "pool", 8_589_934_592),
    "29_avg_pool1d_64x192x65536": (P1, [F32], [[64, 192, 65537]], "pool", 3_221_225_472),
    "30_avg_pool2d_32x64x512x512": (P2, [F32], [[32, 64, 46, 46]], "pool", 2_147_483_648),
    "31_avg_pool3d_16x32x128x128x256": (P3, [F32], [[16, 32, 64, 64, 128]], "pool", 8_589_934_592),
    "32_conv_depthwise_2d_16x64x512x512": ([[16, 64, 512, 512]], [F32], [[16, 64, 510, 510]], "conv",
                                           1_073_741_824),
    "33_conv_transpose3d_8x48x64x64x64": ([[8, 48, 64, 64, 64]], [F32], [[8, 48, 66, 66, 66]], "conv",
                                          402_653_184),
    "34_conv2d_dilated_padded_8x32x512x512": ([[8, 32, 512, 512]], [F32], [[8, 64, 508, 496]], "conv",
                                              268_435_456),
    "35_conv1d_dilated_strided_64x64x524280": ([[64, 64, 524280]], [F32], [[64, 128, 174758]], "conv",
                                               8_589_803_520),
    "36_conv3d_16x3x64x64x64": ([[16, 3, 64, 64, 64]], [F32], [[16, 64, 62, 62, 62]], "conv", 50_331_648),
}
# fmt: on


@pytest.fixture(scope="module")
def published() -> dict[str, Task]:
    return {t.name: t for t in load_suite(bundled_suite_dir("published"))}


def _numel(shape: list[int]) -> int:
    return math.prod(shape)


def _bytes(shapes: list[list[int]], dtypes: list[str]) -> int:
    return sum(_numel(s) * ITEMSIZE[d] for s, d in zip(shapes, dtypes, strict=True))


# --- the suite and its full-size signatures --------------------------------------------------------------


def test_suite_is_registered_beside_level1_and_level2() -> None:
    assert BUNDLED_SUITES[:3] == ("level1", "level2", "published")
    assert bundled_suite_dir("published") == REPO / "tasks" / "published"
    with pytest.raises(TaskError, match="choose one of level1, level2, published"):
        bundled_suite_dir("level3")  # type: ignore[arg-type]
    # Installed packages carry the task files, as they do level1's and level2's (setup.py finds them).
    found = runpy.run_path(str(REPO / "setup.py"), run_name="setup")["packages"]()
    assert "kernelwright.tasks.published" in found


def test_suite_has_exactly_the_published_tasks_in_order(published: dict[str, Task]) -> None:
    assert list(published) == list(PUBLISHED)


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_full_size_signature_is_the_published_one(published: dict[str, Task], name: str) -> None:
    shapes, dtypes, out_shapes, family, _ = PUBLISHED[name]
    task = published[name]
    sig, small = task.signature, task.small_signature
    # Checked by a real forward at the small size, measured at the full size on the meta device.
    assert task.has_small_inputs and small is not None
    assert task.checked_on == "cpu-small" and task.cost_exact
    assert sig.input_shapes == shapes and sig.input_dtypes == dtypes
    assert sig.output_shapes == out_shapes
    assert family in sig.op_families and set(sig.op_families) <= set(OP_FAMILIES)
    assert small.op_families == sig.op_families and small.input_dtypes == dtypes
    # Small inputs: the same ranks, odd somewhere, and tiny beside the full size.
    assert [len(s) for s in small.input_shapes] == [len(s) for s in shapes]
    assert any(d % 2 for s in small.input_shapes for d in s)
    assert sum(map(_numel, small.input_shapes)) * 100 < sum(map(_numel, shapes))


def test_full_size_bytes_from_meta_shapes(published: dict[str, Task]) -> None:
    for name, (_, _, _, _, input_bytes) in PUBLISHED.items():
        sig = published[name].signature
        assert _bytes(sig.input_shapes, sig.input_dtypes) == input_bytes, name
        # A forward reads its inputs and writes its outputs at least once.
        assert published[name].min_bytes >= input_bytes + _bytes(sig.output_shapes, sig.output_dtypes), name
    # The 4096 x 393216 activations move 6.4 GB each way, all of it counted.
    assert published["01_relu_4096x393216"].min_bytes == 2 * 6_442_450_944
    # Parameters and buffers count once: LayerNorm's (64, 256, 256) weight and bias; BatchNorm's weight,
    # bias, running mean and variance (64 each) and its int64 batch counter.
    assert published["09_layer_norm_16x64x256x256"].min_bytes == 2 * 268_435_456 + 2 * 64 * 256 * 256 * 4
    assert published["08_batch_norm_64x64x512x512"].min_bytes == 2 * 4_294_967_296 + 4 * 64 * 4 + 8
    # int64 targets at 8 bytes; the loss is one fp32 scalar.
    assert published["22_cross_entropy_32768x4096"].min_bytes == 537_133_056 + 4


def test_published_sizes_are_gpu_scale(published: dict[str, Task]) -> None:
    # The least time any kernel could take on an H200 is at least 0.1 ms for every task (the 256 MiB
    # LayerNorm and the 512 MiB cross-entropy are the smallest), and milliseconds for most.
    floors = {n: roofline_floor_ms(t, "nvidia-h200").floor_ms for n, t in published.items()}
    assert all(f is not None and f >= 0.1 for f in floors.values()), floors
    assert sum(f is not None and f >= 1.0 for f in floors.values()) >= 25, floors


def test_matmul_flops_at_full_size(published: dict[str, Task]) -> None:
    assert published["23_matmul_large_k_256x524288x256"].flops == 2 * 256 * 256 * 524288
    assert published["24_matmul_irregular_8205x2949x5921"].flops == 2 * 8205 * 2949 * 5921
    assert published["25_matmul_tall_skinny_32768x32"].flops == 2 * 32768 * 32768 * 32
    assert published["01_relu_4096x393216"].flops == 0


# --- what the references compute, on the small inputs ----------------------------------------------------


def _pool(x: torch.Tensor, k: int, s: int, p: int, d: int, *, kind: str) -> torch.Tensor:
    """Max or average pooling over the trailing spatial dims written with pad + unfold (max pads with
    -inf; average pads with zeros and counts them, as torch's count_include_pad default does)."""
    spatial = x.dim() - 2
    x = F.pad(x, [p] * (2 * spatial), value=-math.inf if kind == "max" else 0.0)
    span = d * (k - 1) + 1
    for dim in range(2, 2 + spatial):
        x = x.unfold(dim, span, s)[..., ::d]  # windows along dim, dilated taps last
    windows = x.flatten(-spatial)
    return windows.amax(-1) if kind == "max" else windows.mean(-1)


def _conv(x: torch.Tensor, w: torch.Tensor, stride: int = 1, padding: Any = 0, dilation: Any = 1,
          depthwise: bool = False) -> torch.Tensor:  # fmt: skip
    """A convolution (1-D, 2-D or 3-D, no bias) as a sum over the kernel's taps of strided slices of the
    padded input times that tap's weights: no conv routine involved."""
    nd = x.dim() - 2
    pad = [padding] * nd if isinstance(padding, int) else list(padding)
    dil = [dilation] * nd if isinstance(dilation, int) else list(dilation)
    x = F.pad(x, [p for i in reversed(range(nd)) for p in (pad[i], pad[i])])
    taps = w.shape[2:]
    out_size = [(x.shape[2 + i] - dil[i] * (taps[i] - 1) - 1) // stride + 1 for i in range(nd)]
    out: Any = 0
    for tap in itertools.product(*(range(k) for k in taps)):
        window = [
            slice(t * d, t * d + stride * (n - 1) + 1, stride)
            for t, d, n in zip(tap, dil, out_size, strict=True)
        ]
        xs = x[(slice(None), slice(None), *window)]
        w_tap = w[(slice(None), slice(None), *tap)]
        if depthwise:
            out = out + xs * w_tap[:, 0].reshape(1, -1, *[1] * nd)
        else:
            out = out + torch.einsum("nc...,oc->no...", xs, w_tap)
    return out


def _conv_transpose(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A stride-1, unpadded transposed convolution: the convolution of the input padded by the kernel's
    size less one with the weights' channels swapped and their taps reversed."""
    taps = w.shape[2:]
    flipped = w.transpose(0, 1).flip(list(range(2, w.dim())))
    return _conv(x, flipped, padding=[k - 1 for k in taps])


def _weight(m: torch.nn.Module, name: str) -> torch.Tensor:
    return getattr(m, name).weight.detach().double()


def _scan_matrix(n: int, *, reverse: bool = False) -> torch.Tensor:
    """x @ this sums x over j <= i (or j >= i with reverse): a prefix sum written as a matmul."""
    ones = torch.ones(n, n, dtype=torch.float64)
    return torch.tril(ones) if reverse else torch.triu(ones)


def _norm(x: torch.Tensor, dims: tuple[int, ...], eps: float = 1e-5) -> torch.Tensor:
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dims, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def _log_softmax(x: torch.Tensor) -> torch.Tensor:
    return x - torch.log(torch.exp(x).sum(1, keepdim=True))


def _batch_norm(x: torch.Tensor, model: torch.nn.Module) -> torch.Tensor:
    # Training mode: the batch's biased variance normalizes; the running variance takes the unbiased one.
    n = x.numel() / x.shape[1]
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3), unbiased=False)
    bn = model.bn
    torch.testing.assert_close(bn.running_mean.double(), 0.1 * mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bn.running_var.double(), 0.9 + 0.1 * var * n / (n - 1), rtol=1e-5, atol=1e-6)
    assert int(bn.num_batches_tracked) == 1
    return _norm(x, (0, 2, 3))


Expected = Callable[[list[torch.Tensor], torch.nn.Module], torch.Tensor]

# name: the reference's output recomputed a different way, in float64, from the inputs (and the model,
# for BatchNorm's running statistics).
EXPECTED: dict[str, Expected] = {
    "01_relu_4096x393216": lambda i, m: torch.where(i[0] > 0, i[0], 0.0),
    "02_gelu_4096x393216": lambda i, m: 0.5 * i[0] * (1 + torch.erf(i[0] / math.sqrt(2))),
    "03_silu_4096x393216": lambda i, m: i[0] / (1 + torch.exp(-i[0])),
    "04_sigmoid_4096x393216": lambda i, m: 1 / (1 + torch.exp(-i[0])),
    "05_tanh_4096x393216": lambda i, m: (torch.exp(2 * i[0]) - 1) / (torch.exp(2 * i[0]) + 1),
    "06_softmax_4096x393216": lambda i, m: torch.exp(i[0]) / torch.exp(i[0]).sum(1, keepdim=True),
    "07_log_softmax_4096x393216": lambda i, m: _log_softmax(i[0]),
    "08_batch_norm_64x64x512x512": lambda i, m: _batch_norm(i[0], m),
    "09_layer_norm_16x64x256x256": lambda i, m: _norm(i[0], (1, 2, 3)),
    "10_rms_norm_112x64x512x512": lambda i, m: i[0] / torch.sqrt((i[0] ** 2).mean(1, keepdim=True) + 1e-5),
    "11_instance_norm_112x64x512x512": lambda i, m: _norm(i[0], (2, 3)),
    "12_sum_middle_dim_128x4096x4095": lambda i, m: i[0].sum(1, keepdim=True),
    "13_mean_middle_dim_128x4096x4095": lambda i, m: i[0].sum(1) / i[0].shape[1],
    "14_max_middle_dim_128x4096x4095": lambda i, m: i[0].sort(dim=1).values[:, -1],
    "15_min_middle_dim_128x4096x4095": lambda i, m: i[0].sort(dim=1).values[:, 0],
    # Ties have probability zero with randn inputs, so the index of the maximum is unique.
    "16_argmax_middle_dim_128x4096x4095": lambda i, m: i[0].sort(dim=1).indices[:, -1],
    "17_cumsum_32768x32768": lambda i, m: i[0] @ _scan_matrix(i[0].shape[1]),
    "18_cumprod_32768x32768": lambda i, m: torch.exp(torch.log(i[0]) @ _scan_matrix(i[0].shape[1])),
    "19_reverse_cumsum_32768x32768": lambda i, m: i[0] @ _scan_matrix(i[0].shape[1], reverse=True),
    "20_masked_cumsum_32768x32768": lambda i, m: torch.where(i[1], i[0], 0.0) @ _scan_matrix(i[0].shape[1]),
    "21_l1_norm_32768x65535": lambda i, m: i[0] / i[0].abs().sum(1, keepdim=True),
    "22_cross_entropy_32768x4096": lambda i, m: -_log_softmax(i[0]).gather(1, i[1].unsqueeze(1)).mean(),
    "23_matmul_large_k_256x524288x256": lambda i, m: i[0] @ i[1],
    "24_matmul_irregular_8205x2949x5921": lambda i, m: i[0] @ i[1],
    "25_matmul_tall_skinny_32768x32": lambda i, m: i[0] @ i[1],
    "26_max_pool1d_64x192x65536": lambda i, m: _pool(i[0], 8, 1, 4, 3, kind="max"),
    "27_max_pool2d_32x64x512x512": lambda i, m: _pool(i[0], 4, 1, 1, 1, kind="max"),
    "28_max_pool3d_16x32x128x128x256": lambda i, m: _pool(i[0], 3, 2, 1, 3, kind="max"),
    "29_avg_pool1d_64x192x65536": lambda i, m: _pool(i[0], 8, 1, 4, 1, kind="avg"),
    "30_avg_pool2d_32x64x512x512": lambda i, m: _pool(i[0], 11, 11, 0, 1, kind="avg"),
    "31_avg_pool3d_16x32x128x128x256": lambda i, m: _pool(i[0], 3, 2, 1, 1, kind="avg"),
    "32_conv_depthwise_2d_16x64x512x512": lambda i, m: _conv(i[0], _weight(m, "conv"), depthwise=True),
    "33_conv_transpose3d_8x48x64x64x64": lambda i, m: _conv_transpose(i[0], _weight(m, "conv_transpose")),
    "34_conv2d_dilated_padded_8x32x512x512": lambda i, m: _conv(i[0], _weight(m, "conv"), 1, (2, 4), (2, 3)),
    "35_conv1d_dilated_strided_64x64x524280": lambda i, m: _conv(i[0], _weight(m, "conv"), 3, 0, 4),
    "36_conv3d_16x3x64x64x64": lambda i, m: _conv(i[0], _weight(m, "conv")),
}


def test_every_task_has_an_expected_output() -> None:
    assert list(EXPECTED) == list(PUBLISHED)


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_reference_computes_what_it_says_on_small_inputs(published: dict[str, Task], name: str) -> None:
    task = published[name]
    module = exec_task_module(task.source, name)
    inputs = task_inputs(module, small=True, seed=0)
    model = task_model(module, small=True, seed=0)
    start = time.perf_counter()
    with torch.no_grad():
        out = model(*inputs)
    # Small inputs are for the CPU and its interpreter: the reference takes milliseconds on them.
    assert time.perf_counter() - start < 1.0
    assert isinstance(out, torch.Tensor) and torch.isfinite(out.float()).all()
    as64: list[Any] = [t.double() if t.is_floating_point() else t for t in inputs]
    expected = EXPECTED[name](as64, model)
    assert out.shape == expected.shape
    if not out.is_floating_point():  # argmax: int64 indices, exactly
        assert out.dtype == torch.int64 and torch.equal(out, expected)
        return
    scale = max(1.0, float(expected.abs().max()))  # sums over thousands of elements grow past 1
    torch.testing.assert_close(out.double(), expected, rtol=1e-4, atol=2e-5 * scale)


def test_masks_and_targets_are_in_range(published: dict[str, Task]) -> None:
    masked = exec_task_module(published["20_masked_cumsum_32768x32768"].source, "masked")
    _, mask = task_inputs(masked, small=True, seed=0)
    assert mask.dtype == torch.bool and 0 < int(mask.sum()) < mask.numel()
    ce = exec_task_module(published["22_cross_entropy_32768x4096"].source, "ce")
    logits, targets = task_inputs(ce, small=True, seed=0)
    assert targets.dtype == torch.int64 and 0 <= int(targets.min()) and int(targets.max()) < logits.shape[1]


# --- memory ---------------------------------------------------------------------------------------------

_RSS_PROBE = textwrap.dedent(
    """
    import json
    import torch
    from kernelwright.tasks import bundled_suite_dir
    from kernelwright.tasks.loader import load_here

    # What the loader's child process runs for each task (tasks/load_child.py), here in this process.
    def load_task(path):
        return load_here(path.read_text(), path.stem, path)

    def load_suite(folder):
        return [load_task(p) for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")]

    def status_mib(field):
        # VmHWM is this process's peak resident set; unlike getrusage's ru_maxrss it does not start from
        # the parent's peak (Linux carries ru_maxrss across fork and exec). VmRSS is the current one.
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
        raise RuntimeError(field)

    # Where each input of a million elements or more was made: the tasks call these through `torch.`.
    made = {"meta": 0, "real": []}

    def recording(fn):
        def wrapper(*args, **kwargs):
            t = fn(*args, **kwargs)
            if t.numel() >= 2**20:
                if t.is_meta:
                    made["meta"] += 1
                else:
                    made["real"].append(list(t.shape))
            return t
        return wrapper

    # One small task first, so lazy imports and first-call set-up are not counted as the suite's.
    load_task(bundled_suite_dir("level1") / "01_relu.py")
    for name in ("randn", "rand", "randint"):
        setattr(torch, name, recording(getattr(torch, name)))
    before = status_mib("VmRSS")
    names = [t.name for t in load_suite(bundled_suite_dir("published"))]
    load_mib = status_mib("VmHWM") - before
    # The gauge itself: a 256 MiB tensor that is written must show up in the peak.
    before = status_mib("VmRSS")
    probe = torch.ones(64 * 2**20)
    probe_mib = status_mib("VmHWM") - before
    print(json.dumps({"tasks": len(names), "load_mib": load_mib, "probe_mib": probe_mib, **made}))
    """
)


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads peak memory from Linux's /proc")
def test_loading_the_suite_allocates_no_full_size_tensor() -> None:
    # A fresh process, so the peak is this suite's alone. Every task's full-size inputs and outputs
    # together are 256 MiB or more (several GiB for most), so one made for real would show; the inputs'
    # factories are also watched directly, which catches even the 4 MiB tall-skinny operands.
    proc = subprocess.run(
        [sys.executable, "-c", _RSS_PROBE], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["tasks"] == len(PUBLISHED)
    assert got["probe_mib"] >= 250, got  # the gauge sees a real allocation of this size
    assert got["load_mib"] < 200, got
    # Every full-size input was made, on the meta device only (each task has at least one input).
    assert got["real"] == [] and got["meta"] >= len(PUBLISHED), got
