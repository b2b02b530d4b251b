"""How alike two tasks are, for choosing which experience to start from.

    signature_similarity(a, b)      # 0..1, from two TaskSignatures
    parse_signature_key(text)       # a TaskSignature back from TaskSignature.key() text
    parse_case_line(text)           # the signature a case's "task: NAME (...)" and "ops: ..." lines show

The measure is a weighted sum of five parts, each in 0..1 (a part neither side knows is left out and
the others are re-weighted):

| part | weight | value |
| --- | --- | --- |
| families | 0.40 | Jaccard overlap of the op families (matmul, reduction, norm, ...) |
| ops | 0.15 | Jaccard overlap of the aten ops |
| size | 0.25 | 1 - |log2(elements_a / elements_b)| / 10, at least 0: the inputs' total elements, equal = 1, 1024x apart = 0 |
| layout | 0.10 | 1 when both have the same number of inputs with the same ranks, else 0.5 x the share of equal ranks |
| dtype | 0.10 | 1 when the input dtypes are the same set, 0.5 when they share one, else 0 |

Families weigh most because designs are per family; the size part makes a case at the same scale count
more than one at another scale (a design that won on 4096-long rows says little about 64-long rows).
`NEAR` is the similarity from which a case counts as a near one: the same families, input ranks and dtypes
at sizes up to ~32x apart, or the same sizes with another dtype (when the ops are unknown, as in a case's
line).
"""

from __future__ import annotations

import math
import re

from kernelwright.tasks.task import TaskSignature

NEAR = 0.85
"""From this similarity on, a case is "near": the writer starts from it and skips what failed there."""

_WEIGHTS = {"families": 0.40, "ops": 0.15, "size": 0.25, "layout": 0.10, "dtype": 0.10}
# "task: NAME (families; in 16x64;64; float32)": the shapes are joined by ";" too
_CASE_LINE = re.compile(r"^task:\s*\S+\s*\(([^;()]*);\s*in\s*([0-9x;?]*);\s*([^();]*)\)", re.M)
# "ops: aten.mean.dim aten.add.Tensor", the line right after it when the ops are known
_OPS_LINE = re.compile(r"\nops:[ \t]*([^\n]*)")


def _jaccard(a: list[str], b: list[str]) -> float | None:
    sa, sb = set(a), set(b)
    if not sa or not sb:
        return None
    return len(sa & sb) / len(sa | sb)


def _elements(shapes: list[list[int]]) -> int:
    return sum(math.prod(s) if s else 1 for s in shapes)


def _size(a: TaskSignature, b: TaskSignature) -> float | None:
    if not a.input_shapes or not b.input_shapes:
        return None
    na, nb = max(1, _elements(a.input_shapes)), max(1, _elements(b.input_shapes))
    return max(0.0, 1.0 - abs(math.log2(na / nb)) / 10.0)


def _layout(a: TaskSignature, b: TaskSignature) -> float | None:
    if not a.input_shapes or not b.input_shapes:
        return None
    ra, rb = [len(s) for s in a.input_shapes], [len(s) for s in b.input_shapes]
    if ra == rb:
        return 1.0
    same = sum(x == y for x, y in zip(ra, rb, strict=False))
    return 0.5 * same / max(len(ra), len(rb))


def _dtype(a: TaskSignature, b: TaskSignature) -> float | None:
    da, db = set(a.input_dtypes), set(b.input_dtypes)
    if not da or not db:
        return None
    return 1.0 if da == db else (0.5 if da & db else 0.0)


def signature_similarity(a: TaskSignature, b: TaskSignature) -> float:
    """How alike two tasks are, 0..1 (see the module's table); 0 when nothing is known of either."""
    parts = {
        "families": _jaccard(a.op_families, b.op_families),
        "ops": _jaccard(a.ops, b.ops),
        "size": _size(a, b),
        "layout": _layout(a, b),
        "dtype": _dtype(a, b),
    }
    known = {k: v for k, v in parts.items() if v is not None}
    total = sum(_WEIGHTS[k] for k in known)
    if not total:
        return 0.0
    return sum(_WEIGHTS[k] * v for k, v in known.items()) / total


def _shapes(text: str) -> list[list[int]]:
    out = []
    for part in text.split(";"):
        part = part.strip()
        if part and part != "?":
            try:
                out.append([int(x) for x in part.split("x") if x])
            except ValueError:
                continue
    return out


def _words(text: str, sep: str) -> list[str]:
    return [w.strip() for w in text.split(sep) if w.strip() and w.strip() not in ("?", "unknown")]


def parse_signature_key(text: str) -> TaskSignature | None:
    """The signature written by TaskSignature.key() ("families | ops | in shapes | dtypes"), or None."""
    parts = [p.strip() for p in text.split("|")]
    if len(parts) != 4 or not parts[2].startswith("in"):
        return None
    return TaskSignature(
        op_families=_words(parts[0], "+"),
        ops=_words(parts[1], " "),
        input_shapes=_shapes(parts[2].removeprefix("in").strip()),
        input_dtypes=_words(parts[3], ","),
    )


def parse_case_line(text: str) -> TaskSignature | None:
    """The signature in an experience case's "task: NAME (families; in shapes; dtypes)" line (and its
    "ops: ..." line when there is one), or None."""
    m = _CASE_LINE.search(text)
    if m is None:
        return None
    ops = _OPS_LINE.match(text, m.end())
    return TaskSignature(
        op_families=_words(m.group(1), "+"),
        ops=_words(ops.group(1), " ") if ops else [],
        input_shapes=_shapes(m.group(2)),
        input_dtypes=_words(m.group(3), ","),
    )
