"""The prompt protocol between the context manager (nodes/) and every chat model (providers/).

The coder's user message is a sequence of XML-tagged sections. LLMs read it as prose; the offline
writer parses it with `parse_sections`. Keeping the tag names here (below nodes/ in the dependency
order) lets both sides agree without providers/ importing nodes/.

Sections (each optional except `task` and `request`):
  <request kind="large_step|small_step|repair">free-text instruction</request>
  <task name="...">the reference program source (KernelBench format)</task>
  <target>hardware facts: name, compute capability, bandwidth, peak FLOP/s, device</target>
  <parent>the parent kernel source (small step and repair)</parent>
  <feedback>the parent's evaluation feedback (error kind, message tail, speedup)</feedback>
  <tried>programs already written in this run (small and large steps), one `# kernelwright:` header per line</tried>
  <designs>representative kernels for a large step, each in a <design> child</designs>
  <rules>one validity rule per line, "- You cannot ..."</rules>
  <experience>ranked cases, each in a <case outcome=".." speedup=".." hardware="..">…</case></experience>
  <docs>documentation snippets</docs>
The answer is one fenced ```python block holding a complete module that defines ModelNew, whose first
line is its header (`KernelHeader`): `# kernelwright: family=<f> design=<d> config=<k=v,...>`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REQUEST_KINDS = ("large_step", "small_step", "repair")
SECTION_TAGS = (
    "request", "task", "target", "parent", "feedback", "tried", "designs", "rules", "experience", "docs",
)  # fmt: skip


def render_section(tag: str, body: str, **attrs: str | int | float) -> str:
    """One tagged section; attribute values are rendered with str()."""
    if tag not in SECTION_TAGS:
        raise ValueError(f"unknown prompt section {tag!r}; known: {', '.join(SECTION_TAGS)}")
    attr = "".join(f' {k}="{v}"' for k, v in attrs.items())
    return f"<{tag}{attr}>\n{body.strip()}\n</{tag}>"


@dataclass
class Section:
    tag: str
    body: str
    attrs: dict[str, str] = field(default_factory=dict)


_SECTION_RE = re.compile(
    r"<(?P<tag>[a-z_]+)(?P<attrs>(?:\s+[a-z_]+=\"[^\"]*\")*)\s*>\n?(?P<body>.*?)\n?</(?P=tag)>", re.S
)
_ATTR_RE = re.compile(r'([a-z_]+)="([^"]*)"')


def parse_sections(text: str) -> dict[str, Section]:
    """Top-level sections of a prompt by tag (the first of each tag wins)."""
    out: dict[str, Section] = {}
    for m in _SECTION_RE.finditer(text):
        tag = m.group("tag")
        if tag in SECTION_TAGS and tag not in out:
            out[tag] = Section(tag, m.group("body"), dict(_ATTR_RE.findall(m.group("attrs") or "")))
    return out


_CODE_RE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def extract_code(text: str) -> str | None:
    """The last fenced code block that defines ModelNew, else the last fenced block, else None."""
    blocks = _CODE_RE.findall(text or "")
    for block in reversed(blocks):
        if "ModelNew" in block:
            return block.strip() + "\n"
    return blocks[-1].strip() + "\n" if blocks else None


def message_text(message: Any) -> str:
    """The text of a chat message, whether its content is a string or a list of content blocks."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


# --- the kernel header ---------------------------------------------------------------------------------

HEADER_PREFIX = "# kernelwright:"
# The one grammar: the marker ("#" optional: case bodies quote a header as "design: kernelwright: ..."),
# then `family=`, `design=` and `config=` fields in any order, each optional. family and design are one
# word; config runs to the next field or the line's end, "k=v" pairs split on commas.
_MARK_RE = re.compile(r"(?:#[ \t]*)?\bkernelwright:[ \t]*(?P<body>[^\n]*)")
_FIELD_RE = re.compile(r"(?<!\S)(family|design|config)=")


@dataclass
class KernelHeader:
    """A kernel's first line, `# kernelwright: family=<f> design=<d> config=<k=v,...>`: what it is.

    Written by `render()` (the offline writer's programs; an LLM is asked for the same line) and read by
    `parse` (a program's header) or `find` (the first header anywhere in a prompt section); no other
    code writes or reads the line. A missing field parses as "" (config as {}).
    """

    family: str = ""
    design: str = ""
    config: dict[str, str] = field(default_factory=dict)
    line: str = field(default="", compare=False)
    """The line as written (stripped), for a parsed header; "" for one made here."""

    @classmethod
    def of(cls, family: str, design: str, config: Mapping[str, Any]) -> KernelHeader:
        """A header for a program being written; config values are shown as f"{value}" renders them, but
        num_warps=0 (derived from the tile) as num_warps=auto."""
        return cls(family, design, {str(k): _shown(str(k), v) for k, v in config.items()})

    def render(self) -> str:
        """The header line: `# kernelwright: family=F design=D config=K=V,...` (no newline)."""
        cfg = ",".join(f"{k}={v}" for k, v in self.config.items())
        return f"{HEADER_PREFIX} family={self.family} design={self.design} config={cfg}"

    @property
    def body(self) -> str:
        """The fields as written, without the marker ("family=.. design=.. config=.."); rendered when
        the header was not parsed."""
        m = _MARK_RE.search(self.line or self.render())
        return m.group("body").strip() if m else ""

    @classmethod
    def parse(cls, text: str | None) -> KernelHeader | None:
        """The header of a program: its first non-empty line when that is a `# kernelwright:` line that
        names at least one field (leading whitespace allowed); else None."""
        line = header_line(text)
        return _fields(line, _MARK_RE.match(line)) if line else None

    @classmethod
    def find(cls, text: str | None) -> KernelHeader | None:
        """The first header anywhere in `text` (a parent, a design, a case body, a <tried> line), with
        or without its "#"; None when there is none."""
        for m in _MARK_RE.finditer(text or ""):
            if _FIELD_RE.search(m.group("body")):
                return _fields(m.group(0).strip(), m)
        return None


AUTO_WARPS = "auto"
"""How a header writes num_warps=0: the writer derives the warps from the tile."""


def _shown(key: str, value: Any) -> str:
    return AUTO_WARPS if key == "num_warps" and value == 0 else f"{value}"


def header_line(text: str | None) -> str | None:
    """A program's header line as written (stripped): its first non-empty line, when that is a
    `# kernelwright:` line naming at least one field; else None."""
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _MARK_RE.match(line)
        ok = m is not None and line.startswith("#") and _FIELD_RE.search(m.group("body")) is not None
        return line if ok else None
    return None


def _fields(line: str, m: re.Match[str] | None) -> KernelHeader:
    body = m.group("body").strip() if m else ""
    values: dict[str, str] = {}
    marks = list(_FIELD_RE.finditer(body))
    for i, mk in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        values.setdefault(mk.group(1), body[mk.end() : end].strip())
    config: dict[str, str] = {}
    for part in values.get("config", "").split(","):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if eq and key:
            # num_warps=auto reads back as the 0 the writer's configs hold
            config[key] = "0" if (key, value) == ("num_warps", AUTO_WARPS) else value
    word = {k: (values.get(k, "").split() or [""])[0] for k in ("family", "design")}
    return KernelHeader(word["family"], word["design"], config, line)


# A program that leaves ops to torch (cuDNN + a fused Triton epilogue) says so in its docstring, and a rule
# learned from such a program names the op, so that it binds only programs that keep that op too. Writers
# and the reflector meet here: the offline writer writes the first phrase, the reflector reads it and writes
# the second into its rule, the offline writer's policy reads that back.
_KEPT_RE = re.compile(r"kept as torch: ([A-Za-z0-9_, ]+)")
_BESIDE_RE = re.compile(r"\bbeside torch's ([A-Za-z0-9_]+)")


def kept_as_torch_line(ops: list[str]) -> str:
    """The docstring phrase naming the ops a program left to torch: "kept as torch: conv2d, max_pool2d"."""
    return f"kept as torch: {', '.join(ops)}"


def kept_as_torch(code: str) -> list[str]:
    """The ops a program's `kept_as_torch_line` names, in order; [] without one."""
    m = _KEPT_RE.search(code)
    return [x.strip() for x in m.group(1).split(",")] if m else []


def beside_torch(op: str) -> str:
    """A rule's qualifier for a program that kept `op` in torch: "beside torch's conv2d"."""
    return f"beside torch's {op}"


def beside_torch_op(rule: str) -> str | None:
    """The op a rule's `beside_torch` qualifier names, or None."""
    m = _BESIDE_RE.search(rule)
    return m.group(1) if m else None
