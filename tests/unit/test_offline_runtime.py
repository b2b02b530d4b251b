"""The offline writer's runtime modules (providers/offline/runtime/): the program text they hold is what the
writer pastes, whole and exactly, and each module is the same code a program runs."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from kernelwright.providers.offline import runtime
from kernelwright.providers.offline.emit import emit, emit_gluon
from kernelwright.providers.offline.families.conv import conv_runtime
from kernelwright.providers.offline.runtime import program_text
from kernelwright.providers.offline.runtime.conv import fit_block

RUNTIME_DIR = Path(runtime.__file__).parent
MODULES = sorted(p.stem for p in RUNTIME_DIR.glob("*.py") if p.stem != "__init__")


def test_every_module_lists_its_program_texts():
    assert {"host", "launch", "jit_math", "batchnorm", "conv", "pool", "ws_gemm"} <= set(MODULES)
    for name in MODULES:
        listed = importlib.import_module(f"kernelwright.providers.offline.runtime.{name}").PROGRAM_TEXTS
        assert tuple(runtime._regions(name)) == listed, name
        for region in listed:
            text = program_text(name, region)
            assert text.strip(), (name, region)
            ast.parse(text)  # each text is whole Python by itself


def test_module_source_is_the_program_text():
    # every line of a module after `# fmt: off` is a marker or program text: nothing a program lacks runs
    # in the module, so testing the module tests what programs carry
    for name in MODULES:
        source = (RUNTIME_DIR / f"{name}.py").read_text()
        body = source.split("# fmt: off\n", 1)[1]
        texts = "".join(program_text(name, r) for r in runtime._regions(name))
        kept = "".join(
            line
            for line in body.splitlines(keepends=True)
            if not line.startswith(("# program text: ", "# end of program text: "))
        )
        assert kept == texts, name


def test_writers_paste_the_module_text():
    assert emit.RUNTIME == program_text("host", "host") + program_text("host", "num_sms")
    assert emit.HELPERS["_kw_launch"] == program_text("launch", "_kw_launch")
    assert emit.HELPERS["_kw_gelu"] == program_text("jit_math", "_kw_gelu")
    assert conv_runtime.HOST_HELPERS.startswith(program_text("conv", "conv_host"))
    assert conv_runtime.HOST_HELPERS.endswith(inspect.getsource(fit_block))
    assert emit.BN_RUNNING == program_text("batchnorm", "bn_running")


def test_gluon_tiles_match_the_writer():
    # the writer sizes shared memory by emit_gluon's tiles; the kernel's launcher reads _KW_WS_TILES
    tiles = f"_KW_WS_TILES = ({emit_gluon.WS_TILE!r}, {emit_gluon.WS_COOP_TILE!r})"
    assert tiles in emit_gluon.WS_GEMM_HELPER


def test_rows_tile_clamps_to_the_plane():
    from kernelwright.providers.offline.runtime.pool import _kw_rows_tile

    assert _kw_rows_tile(7, 5, 512, 8, 8) == (32, 8, 4)  # BLOCK down to 32, BLOCK_H to 8 rows of 7
    assert _kw_rows_tile(1, 300, 128, 4, 8) == (128, 1, 2)
    assert _kw_rows_tile(64, 2048, 1024, 1, 1) == (1024, 1, 1)


def test_unknown_names_are_clear_errors():
    with pytest.raises(KeyError, match="no runtime module 'nope'"):
        program_text("nope", "x")
    with pytest.raises(KeyError, match="has no program text 'nope'"):
        program_text("host", "nope")
