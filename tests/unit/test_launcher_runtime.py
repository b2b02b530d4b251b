"""The host helpers every generated launcher carries (providers/offline/runtime/host.py, pasted into programs
as emit.RUNTIME): plain-int stand-ins for
triton.cdiv, triton.next_power_of_2 and torch.broadcast_shapes, and a stride walk remembered per layout.
They run on every forward, so they must agree with what they stand in for exactly."""

from __future__ import annotations

import pytest
import torch
import triton

from kernelwright.providers.offline.runtime import host


@pytest.fixture(scope="module")
def rt() -> dict:
    # the module whose program text the launchers carry (test_offline_runtime holds text and module equal)
    return vars(host)


def test_int_helpers_agree_with_triton(rt):
    for n in [0, 1, 2, 3, 4, 5, 7, 8, 9, 1000, 1024, 1025, 4095, 2**31 - 1, 2**31, 2**31 + 1]:
        assert rt["_np2"](n) == triton.next_power_of_2(n), n
        for b in (1, 3, 16, 128, 1024):
            assert rt["_cdiv"](n, b) == triton.cdiv(n, b), (n, b)


@pytest.mark.parametrize(
    "shapes",
    [
        [(4, 1, 8), (3, 1)],
        [(5,), (2, 3, 5), (1, 5)],
        [(2, 0, 3), (1, 3)],
        [(1,), ()],
        [(7, 1), (1, 9), (7, 9)],
        [torch.Size([2, 3])],
    ],
)
def test_bshapes_is_broadcast_shapes(rt, shapes):
    assert rt["_bshapes"](*shapes) == tuple(torch.broadcast_shapes(*shapes))


def test_bshapes_refuses_what_does_not_broadcast(rt):
    with pytest.raises(RuntimeError, match="do not broadcast"):
        rt["_bshapes"]((2, 3), (4, 3))
    with pytest.raises(RuntimeError):
        torch.broadcast_shapes((2, 3), (4, 3))


def _walk_without_memory(t, shape, groups):
    """The walk as launchers did it before it was remembered: expand, read strides, copy once if needed."""
    for _ in range(2):
        st = t.expand(shape).stride()
        out = []
        for g in groups:
            stride, step = 0, None
            for d in reversed(g):
                if shape[d] == 1:
                    continue
                if step is None:
                    stride = st[d]
                elif st[d] != step:
                    break
                step = st[d] * shape[d]
            else:
                out.append(stride)
                continue
            break
        else:
            return t, out
        t = t.contiguous()
    raise AssertionError


def test_group_strides_is_remembered_per_layout_and_still_copies_each_call(rt):
    x = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
    cases = [
        (x, (2, 3, 4), [[0, 1], [2]]),
        (x[:, :, :1], (2, 3, 4), [[0], [1], [2]]),  # broadcast over the last dim
        (x.permute(0, 2, 1), (2, 4, 3), [[0, 1], [2]]),  # (0, 1) cannot be walked as one: copied
        (x.transpose(0, 2), (4, 3, 2), [[0], [1], [2]]),
        (x[:, 1:, :], (2, 2, 4), [[0, 1], [2]]),
    ]
    for t, shape, groups in cases:
        for _ in range(3):  # the first call walks, the next ones read the remembered walk
            got_t, got = rt["_group_strides"](t, shape, groups)
            want_t, want = _walk_without_memory(t, shape, groups)
            assert got == want and got_t.stride() == want_t.stride(), (shape, groups)
            assert torch.equal(got_t.expand(shape), t.expand(shape))
            # a copy is made for this call's tensor, never one remembered from another call
            assert (got_t.data_ptr() == t.data_ptr()) == (want_t is t)
    permuted = x.permute(0, 2, 1)
    first, _ = rt["_group_strides"](permuted, (2, 4, 3), [[0, 1], [2]])
    other = permuted + 1
    second, _ = rt["_group_strides"](other, (2, 4, 3), [[0, 1], [2]])
    assert torch.equal(second, (other).contiguous()) and second.data_ptr() != first.data_ptr()


def _helpers(*names: str) -> dict:
    """A namespace holding the named launch helpers' program texts and those they call (HELPER_DEPS), as a
    program holds them."""
    from kernelwright.providers.offline.emit.emit import HELPER_DEPS, HELPERS

    namespace: dict = {"torch": torch}
    for name in names:
        for text in [*HELPER_DEPS.get(name, []), name]:
            exec(HELPERS[text], namespace)
    return namespace


@pytest.fixture(scope="module")
def align() -> object:
    return _helpers("_kw_align")["_kw_align"]


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(5, 7),  # fp32 rows 28 bytes apart
        lambda: torch.randn(7, 5).mT,  # column-major, columns 28 bytes apart
        lambda: torch.randn(3, 5, 9, dtype=torch.float16),  # batched, 18-byte rows
        lambda: torch.randn(6, 11)[:, 1:],  # a view whose base is not 16-byte aligned
    ],
)
def test_align_copies_unaligned_matrices_into_aligned_rows(align, make):
    t = make()
    out = align(t)
    assert out.shape == t.shape and torch.equal(out, t) and out.data_ptr() % 16 == 0
    size = t.element_size()
    major = -2 if t.stride(-1) == 1 else -1  # the stride between rows (row-major) or columns
    # a multiple of 16 elements: what Triton can prove of a stride argument (divisible by 16 or not)
    assert out.stride(major) % 16 == 0 and out.stride(-1 if major == -2 else -2) == 1
    assert out.stride(major) * size % 16 == 0


def test_align_leaves_aligned_and_vector_inputs_alone(align):
    for t in (torch.randn(5, 16), torch.randn(5, 32).mT, torch.randn(9), torch.randn(4, 16).expand(3, 4, 16)):
        assert align(t) is t
    t = torch.randn(5, 8)
    assert align(t) is not t  # 32-byte rows, but 8 elements apart: copied


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(7, 5),  # a row-major B at an odd K (7): one padded copy
        lambda: torch.randn(3, 9, 4, dtype=torch.float16),  # batched, half precision
        lambda: torch.randn(9, 4).expand(3, 9, 4),  # one B broadcast over a batch
    ],
)
def test_kmajor_copies_b_once_into_k_contiguous_aligned_columns(align, make):
    """B read K-major in one copy whose columns start 16 elements apart, so _kw_align copies nothing after."""
    namespace = _helpers("_kw_kmajor")
    b = make()
    out = namespace["_kw_kmajor"](b)
    assert out.shape == b.shape and torch.equal(out, b)
    assert out.stride(-2) == 1 and out.stride(-1) % 16 == 0 and out.data_ptr() % 16 == 0
    assert align(out) is out
    k_major = torch.randn(5, 7).mT
    assert namespace["_kw_kmajor"](k_major) is k_major


@pytest.mark.parametrize(
    ("helper", "shape", "view"),
    [
        ("_kw_align", (6, 13), lambda w: w.T),  # a Linear's weight.T at an odd K (13): columns 13 apart
        ("_kw_kmajor", (13, 6), lambda w: w),  # `x @ self.w`, w row-major: B copied K-major
        ("_kw_kmajor", (2, 13, 6), lambda w: w[1]),  # a view of one slice of a parameter
    ],
)
def test_a_parameters_layout_copy_is_kept_until_the_parameter_changes(helper, shape, view):
    """A parameter's layout copy is made once, not on every call: given again while the parameter is the
    same object, storage and version, made again after an in-place update or when the module holds another
    parameter. A plain tensor (an activation) is copied on every call."""
    namespace = _helpers(helper)
    copy = namespace[helper]
    m = torch.nn.Module()
    m.w = torch.nn.Parameter(torch.randn(shape))
    first = copy(view(m.w))
    assert first.data_ptr() != view(m.w).data_ptr() and torch.equal(first, view(m.w))
    assert not first.requires_grad  # made without autograd: launched kernels have none
    assert copy(view(m.w)).data_ptr() == first.data_ptr()  # the kept copy (or a view of it: _kw_align's .mT)
    with torch.no_grad():
        m.w.mul_(2.0)  # an optimizer's step: a new version
    second = copy(view(m.w))
    assert second.data_ptr() != first.data_ptr() and torch.equal(second, view(m.w))
    m.w = torch.nn.Parameter(torch.randn(shape))  # another parameter (perhaps at a freed address)
    third = copy(view(m.w))
    assert third.data_ptr() != second.data_ptr() and torch.equal(third, view(m.w))
    m.load_state_dict({"w": torch.randn(shape)})
    assert torch.equal(copy(view(m.w)), view(m.w))
    plain = view(torch.randn(shape))
    once, again = copy(plain), copy(plain)
    assert once.data_ptr() != again.data_ptr() and torch.equal(once, again)
    kept = namespace["_KW_KEPT"]
    assert len(kept) == 1  # the replaced parameter's copies went with it
    del m, third
    assert not kept  # and the last one with its module


def test_a_parameter_made_under_inference_mode_is_copied_each_call():
    """An inference tensor keeps no version counter (reading it raises): its copy is not kept."""
    copy = _helpers("_kw_kmajor")["_kw_kmajor"]
    with torch.inference_mode():
        w = torch.nn.Parameter(torch.randn(13, 6))
        once, again = copy(w), copy(w)
    assert once.data_ptr() != again.data_ptr() and torch.equal(once, w) and once.stride(-2) == 1


def test_columns_wrap_past_n_only_where_the_storage_holds_them(align):
    from kernelwright.providers.offline.emit.emit import HELPERS

    namespace: dict = {"torch": torch}
    exec(HELPERS["_kw_wrap"], namespace)
    wrap = namespace["_kw_wrap"]
    plain = torch.randn(7, 21)
    assert wrap(21, plain) == 21  # the last row ends at the storage's end: reading to 32 would overrun
    assert wrap(21, align(plain)) == 32  # an aligned copy's rows are padded to 32 columns
    assert wrap(16, torch.randn(3, 16)) == 16
    assert wrap(21, torch.randn(7, 40)[:, :21]) == 32  # a view whose rows continue in the storage
    assert wrap(21, torch.randn(7, 40)[:, 19:]) == 21  # ... unless the last row would run past its end
    assert wrap(21, torch.randn(21, 7).mT) == 21  # not unit-stride along its columns


@pytest.fixture(scope="module")
def launch() -> dict:
    from kernelwright.providers.offline.emit.emit import HELPERS

    namespace: dict = {"torch": torch}
    exec(HELPERS["_kw_launch"], namespace)
    return namespace


def test_direct_launch_keys_are_finer_than_tritons_specialization(launch):
    """Two arguments _kw_launch keys alike must be ones Triton compiles alike: the launch then runs the
    kernel Triton compiled for the first (a wrong kernel otherwise: a 1 or an alignment baked in)."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend
    from triton.tools.tensor_descriptor import TensorDescriptor

    base = torch.zeros(4096, dtype=torch.bfloat16)
    flat = base.view(64, 64)
    args = [0, 1, 2, 15, 16, 17, -1, -16, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, True, False, None, 1.0,
            2.5, 16.0, base, base[8:], base[1:], base.float(), base.float()[2:], base.float()[4:],
            TensorDescriptor.from_tensor(flat, [16, 32]), TensorDescriptor.from_tensor(flat, [32, 32]),
            TensorDescriptor.from_tensor(flat.float(), [16, 32]), TensorDescriptor(base[8:], [64, 63], [64, 1], [16, 32])]  # fmt: skip

    def ours(a):
        return a if type(a) is int else launch["_kw_arg_key"](a)

    def tritons(a):
        return native_specialize_impl(BaseBackend, a, False, True, True)

    pairs = 0
    for a in args:
        for b in args:
            if ours(a) == ours(b):
                pairs += 1
                assert tritons(a) == tritons(b), (a, b)
    assert pairs > len(args)  # some distinct arguments do share a key (base and base[8:]: both aligned)
    assert ours(1) != ours(True) and ours(1) != ours(1.0) and ours(base) != ours(base[1:])


def test_direct_launch_goes_through_the_jit_where_no_compiled_kernel_comes_back(launch, monkeypatch):
    """The interpreter's launch returns no compiled kernel: every launch is the JIT's, nothing is kept."""

    calls = []

    class Jit:
        params = []

        def __getitem__(self, grid):
            return lambda *a, **kw: calls.append((grid, a, kw))

    kernel = Jit()
    for _ in range(3):
        launch["_kw_launch"](kernel, (2,), torch.zeros(4), 7, BLOCK=8)
    assert len(calls) == 3 and calls[0] == ((2,), calls[0][1], {"BLOCK": 8})
    assert launch["_KW_COMPILED"] == {}


def test_direct_launch_keeps_the_compiled_kernel_and_appends_the_later_parameters(tmp_path):
    """The GPU path of _kw_launch without a GPU: a real @triton.jit kernel whose JIT launch is replaced by
    one that returns a stand-in compiled kernel (what Triton's JIT returns after a GPU launch)."""
    import importlib.util
    import types

    from kernelwright.providers.offline.emit.emit import HELPERS

    path = tmp_path / "kw_direct_kernel.py"
    path.write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def k(x_ptr, n, scale, BLOCK: tl.constexpr, FLAG: tl.constexpr = 0):\n    pass\n"
    )
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = module.k
    jit_launches, direct = [], []

    class Compiled:
        packed_metadata = object()

        def __getitem__(self, grid):
            return lambda *args: direct.append((grid, args))

    def jit_run(*args, grid, warmup, **kw):
        jit_launches.append((grid, args, kw))
        return Compiled()

    kernel.run = jit_run
    device = [0]
    # (no torch._C stream lookup: the kept kernel is launched as `compiled[grid](...)`, the stand-in's; the
    # launcher's own path is tested on a GPU, tests/kernels/test_launch_gpu.py)
    fake_torch = types.SimpleNamespace(
        Tensor=torch.Tensor,
        cuda=types.SimpleNamespace(current_device=lambda: device[0]),
        _C=types.SimpleNamespace(),
    )
    ns: dict = {"torch": fake_torch}
    exec(HELPERS["_kw_launch"], ns)
    launch = ns["_kw_launch"]
    x = torch.zeros(64)
    launch(kernel, (4,), x, 64, 0.5, BLOCK=16)  # first: through the JIT
    launch(kernel, (4,), x, 64, 0.5, BLOCK=16)  # the same kinds: direct, 1-D grid padded to 3-D
    assert len(jit_launches) == 1 and direct == [((4, 1, 1), (x, 64, 0.5, 16, 0))]
    launch(kernel, (4,), x[1:], 63, 0.5, BLOCK=16)  # another alignment and size: the JIT again
    launch(kernel, (4,), x, 64, 0.5, BLOCK=16, FLAG=1)  # another constexpr: the JIT again
    launch(kernel, lambda meta: (4,), x, 64, 0.5, BLOCK=16)  # a grid function: the JIT's to evaluate
    device[0] = 1
    launch(kernel, (4,), x, 64, 0.5, BLOCK=16)  # another current device: the JIT's kernel for it
    assert len(jit_launches) == 5 and len(direct) == 1
    assert len(ns["_KW_COMPILED"]) == 3
    for i in range(4100):  # arguments that never repeat: the kept kernels are dropped, not accumulated
        launch(kernel, (4,), x, i, 0.5, BLOCK=16)
    assert len(ns["_KW_COMPILED"]) <= 4096
