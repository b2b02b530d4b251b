"""The built-in offline kernel writer: real Triton kernels for KernelBench-format tasks, no LLM.

    from kernelwright.providers.offline import OfflineKernelWriter, write_program
    model = OfflineKernelWriter(seed=0)          # a LangChain chat model
    answer = write_program(prompt_text, seed=0)  # the same, as a function

The task is traced into canonical ops (analysis.py, lowering*.py), cut into kernels (schedule.py), and
each kernel is written by its kind's generator (rows, matmul, pointwise: kind.py and kind_*.py) in a
design and config chosen from the request and the context's rules and experience (designs.py,
policy.py). Writers of whole programs (Triton convolutions, standalone pooling) are asked first. The
handlers, kinds and whole-task writers are named in one list each in plugins.py. README.md in this folder is a map: the path
from prompt to program, and how to add an operator, a design or a kernel kind.
"""

import os

# Tracing a task symbolically asks sympy the same questions about the same symbols (s0, s1, ... in every
# trace) again and again; sympy's default cache of 1,000 answers per function is far too small for a
# model's regions (a DenseNet region's cat of 24 inputs alone overflows it), and the answers are
# recomputed. Effective only when this package is imported before sympy; a value the user set is kept.
os.environ.setdefault("SYMPY_CACHE_SIZE", "20000")

from kernelwright.providers.offline.chat_model import OfflineKernelWriter, estimate_tokens
from kernelwright.providers.offline.choice.context import WriterContext, parse_meta
from kernelwright.providers.offline.choice.designs import REGISTRY, Design
from kernelwright.providers.offline.choice.policy import forbidden, neighbours
from kernelwright.providers.offline.frontend.analysis import AnalysisError, AnalyzedTask, analyze_source
from kernelwright.providers.offline.writer import (
    TaskWriter,
    WriterAnswer,
    write_program,
)

__all__ = [
    "REGISTRY",
    "WriterContext",
    "TaskWriter",
    "forbidden",
    "neighbours",
    "AnalysisError",
    "AnalyzedTask",
    "Design",
    "OfflineKernelWriter",
    "WriterAnswer",
    "analyze_source",
    "estimate_tokens",
    "parse_meta",
    "write_program",
]
