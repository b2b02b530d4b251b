"""kernelwright memory: the experience graph (cases + lineage) and the rule book, in Chroma.

`open_memory(location)` returns a `Memory` with `.cases` (ExperienceGraph) and `.rules` (RuleBook).
Embeddings work offline (memory.embedding); nothing here downloads anything.
"""

from kernelwright.memory.core import Memory, MemoryImportError, MemoryStats, TransferReport, open_memory
from kernelwright.memory.embedding import HashingEmbedding, hash_embed, make_embedder, text_similarity
from kernelwright.memory.graph import ExperienceGraph, RetrievedCase
from kernelwright.memory.records import (
    OUTCOMES,
    Case,
    Evidence,
    Exposure,
    Outcome,
    Rule,
    RuleCandidate,
    error_signature,
    installed_versions,
    outcome_label,
    step_ratio,
)
from kernelwright.memory.rules import (
    PruneReport,
    RankedRule,
    RuleBook,
    RuleEffect,
    RuleUpdate,
)
from kernelwright.memory.store import (
    MemoryDamagedError,
    MemoryLocationError,
    MemoryServerError,
    resolve_location,
)

# One import name (kernelwright/__init__.py): from the repository root this folder must not load as `memory`.
if __name__ != "kernelwright.memory":
    raise ImportError(f"import kernelwright.memory, not {__name__}: the package has one import name")

__all__ = [
    "OUTCOMES",
    "Case",
    "Evidence",
    "ExperienceGraph",
    "Exposure",
    "HashingEmbedding",
    "Memory",
    "MemoryDamagedError",
    "MemoryImportError",
    "MemoryLocationError",
    "MemoryServerError",
    "MemoryStats",
    "Outcome",
    "PruneReport",
    "RankedRule",
    "RetrievedCase",
    "Rule",
    "RuleBook",
    "RuleCandidate",
    "RuleEffect",
    "RuleUpdate",
    "TransferReport",
    "error_signature",
    "hash_embed",
    "installed_versions",
    "make_embedder",
    "open_memory",
    "outcome_label",
    "resolve_location",
    "step_ratio",
    "text_similarity",
]
