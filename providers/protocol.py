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
The answer is one fenced ```python block holding a complete module that defines ModelNew.
"""

from __future__ import annotations

import re
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
