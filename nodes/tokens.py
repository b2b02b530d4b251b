"""Counting a prompt's tokens offline.

Tokens are counted with tiktoken when its encoding file is already in the local cache (tiktoken would
otherwise download it, which fails offline and is not allowed at run time); otherwise with the
estimate ceil(characters / 3.5), which over-counts typical code and English slightly, so a prompt
within the estimated budget is within the real one for common tokenizers.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from functools import lru_cache
from typing import Any

CHARS_PER_TOKEN = 3.5
# (url tiktoken caches the file under, sha256 tiktoken expects). With a file whose hash differs,
# tiktoken deletes it and downloads again, so the hash is checked here first.
_TIKTOKEN_BLOBS = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}


class TokenCounter:
    """Counts tokens with a cached tiktoken encoding, or with the documented character estimate."""

    def __init__(self, encoding: str | None = None) -> None:
        self._enc: Any = None
        self.name = f"estimate:chars/{CHARS_PER_TOKEN}"
        for enc_name in [encoding] if encoding else list(_TIKTOKEN_BLOBS):
            enc = _cached_tiktoken(enc_name)
            if enc is not None:
                self._enc = enc
                self.name = f"tiktoken:{enc_name}"
                break

    @property
    def exact(self) -> bool:
        return self._enc is not None

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        if self._enc is not None:
            return len(self._enc.encode(text, disallowed_special=()))
        return math.ceil(len(text) / CHARS_PER_TOKEN)


def tiktoken_cache_dir() -> str:
    """Where tiktoken looks for encoding files (same rule as tiktoken.load.read_file_cached)."""
    return (
        os.environ.get("TIKTOKEN_CACHE_DIR")
        or os.environ.get("DATA_GYM_CACHE_DIR")
        or os.path.join(tempfile.gettempdir(), "data-gym-cache")
    )


def _cached_tiktoken(name: str) -> Any:
    """The tiktoken encoding if its file is already cached locally and intact, else None (never downloads)."""
    blob = _TIKTOKEN_BLOBS.get(name)
    if blob is None:
        return None
    url, sha256 = blob
    path = os.path.join(tiktoken_cache_dir(), hashlib.sha1(url.encode()).hexdigest())
    if not os.path.isfile(path):
        return None
    return _load_tiktoken(name, path, os.path.getmtime(path), sha256)


@lru_cache(maxsize=4)
def _load_tiktoken(name: str, path: str, mtime: float, sha256: str) -> Any:
    with open(path, "rb") as fh:
        if hashlib.sha256(fh.read()).hexdigest() != sha256:
            return None
    import tiktoken

    return tiktoken.get_encoding(name)


@lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    return TokenCounter()
