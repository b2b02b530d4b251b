"""Requests to a Chroma server that survive its restart or a dropped connection: sent again, with backoff.

A memory on a `chroma run` server (`--memory http://HOST:PORT`) talks HTTP for every read and write. A
transient failure (connection refused or reset, a timeout, the server closing without an answer, HTTP
502, 503 or 504 from a proxy in front of it) makes `RetryTransport` send the same request again after
0.05, 0.1, 0.2 ... 2 s (or the server's `Retry-After`), until it gets an answer or `budget_s` seconds
(KERNELWRIGHT_MEMORY_RETRY_S, default 60; 0 sends each request once) have passed since the first try.
Then it raises `ServerUnavailable`, which memory/store.py turns into one error naming the server and
what was being written. Any other answer, an HTTP 4xx included, goes back to Chroma's client at once,
never sent again.

A request sent again may already have landed (the connection dropped after the server acted, before
its answer came back). memory/store.py makes every request it sends safe to repeat; see its docstring.

Chroma's HTTP client exposes no transport setting, so `install` puts the transport into the client's
httpx session; with a Chroma whose client is built otherwise, memory works without retries and warns.

An outage is not ridden out silently: once a request has been failing for ANNOUNCE_AFTER_S, a line on the
`kernelwright.wait.memory` logger names the server and the error (the CLI prints it on stderr), another
every ANNOUNCE_EVERY_S while it lasts, and one when the server answers again. A blip shorter than that
stays quiet.
"""

from __future__ import annotations

import contextvars
import logging
import os
import random
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

ENV_RETRY_S = "KERNELWRIGHT_MEMORY_RETRY_S"
DEFAULT_RETRY_S = 60.0
"""Half of memory.store.SERVER_LOCK_STALE_S: a write that waits out one outage keeps its server lock."""
TRANSIENT_STATUS = frozenset({502, 503, 504})
TRANSIENT_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
"""Refused, reset or timed out, or closed without an answer. Not: a bad URL, a TLS or protocol misuse."""
FIRST_DELAY_S = 0.05
MAX_DELAY_S = 2.0
ANNOUNCE_AFTER_S = 1.0
ANNOUNCE_EVERY_S = 10.0
_wait_log = logging.getLogger("kernelwright.wait.memory")

_RETRIES_OFF: contextvars.ContextVar[bool] = contextvars.ContextVar("kernelwright_retries_off", default=False)


class ServerUnavailable(Exception):
    """A request kept failing transiently for the whole retry budget."""

    def __init__(self, url: str, method: str, tries: int, elapsed_s: float, last: str) -> None:
        self.url, self.method, self.tries, self.elapsed_s, self.last = url, method, tries, elapsed_s, last
        super().__init__(f"{method} {url}: no answer after {tries} tries in {elapsed_s:.1f} s (last: {last})")


def retry_budget(value: float | None = None) -> float:
    """Seconds a request may take, retries included: `value`, else $KERNELWRIGHT_MEMORY_RETRY_S, else 60."""
    if value is None:
        raw = os.environ.get(ENV_RETRY_S, "").strip()
        try:
            value = float(raw) if raw else DEFAULT_RETRY_S
        except ValueError as exc:
            raise ValueError(f"{ENV_RETRY_S}={raw!r} is not a number of seconds") from exc
    if value < 0:
        raise ValueError(f"the memory server's retry budget must be >= 0 seconds, got {value}")
    return float(value)


@contextmanager
def retries_off() -> Iterator[None]:
    """Requests made inside (in this thread) are sent once: connecting says at once that it cannot."""
    token = _RETRIES_OFF.set(True)
    try:
        yield
    finally:
        _RETRIES_OFF.reset(token)


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:  # absent, or an HTTP date: back off as usual
        return 0.0


class RetryTransport(httpx.BaseTransport):
    """Sends a request again on a transient failure, until an answer or `budget_s` seconds."""

    def __init__(self, inner: httpx.BaseTransport, budget_s: float) -> None:
        self.inner = inner
        self.budget_s = budget_s

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if _RETRIES_OFF.get() or self.budget_s <= 0:
            return self.inner.handle_request(request)
        request.read()  # the body is sent again from memory
        start = time.monotonic()
        deadline = start + self.budget_s
        delay = FIRST_DELAY_S
        tries = 0
        server = f"{request.url.scheme}://{request.url.netloc.decode('ascii', 'replace')}"
        announce_at = start + ANNOUNCE_AFTER_S
        announced = False
        while True:
            tries += 1
            # Chroma's client waits forever for an answer; here a try ends with the budget, so a server
            # that accepted the connection and hung counts as a failure too.
            left = max(deadline - time.monotonic(), 0.05)
            request.extensions = {
                **request.extensions,
                "timeout": {"connect": left, "read": left, "write": left, "pool": left},
            }
            wait = 0.0
            try:
                response = self.inner.handle_request(request)
            except TRANSIENT_ERRORS as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                if response.status_code not in TRANSIENT_STATUS:
                    if announced:
                        _wait_log.warning(
                            f"memory server {server} answered again after {time.monotonic() - start:.1f} s "
                            f"({tries} tries)"
                        )
                    return response
                wait = _retry_after(response)
                response.read()
                response.close()
                last = f"HTTP {response.status_code}"
            now = time.monotonic()
            if now >= deadline:
                raise ServerUnavailable(str(request.url), request.method, tries, now - start, last)
            if now >= announce_at:
                _wait_log.warning(
                    f"memory server {server}: {last}; no answer for {now - start:.0f} s ({tries} tries), "
                    f"sending {request.method} {request.url.path} again for up to {deadline - now:.0f} s more"
                )
                announced = True
                announce_at = now + ANNOUNCE_EVERY_S
            # The last try is made at the deadline, not skipped because the next wait would pass it.
            time.sleep(min(max(wait, delay * random.uniform(0.5, 1.0)), deadline - now))
            delay = min(delay * 2, MAX_DELAY_S)

    def close(self) -> None:
        self.inner.close()


def install(client: Any, budget_s: float) -> bool:
    """Put a RetryTransport (or set its budget) under a chromadb HttpClient; False where it cannot."""
    session = getattr(getattr(client, "_server", None), "_session", None)
    transport = getattr(session, "_transport", None)
    if not isinstance(session, httpx.Client) or not isinstance(transport, httpx.BaseTransport):
        warnings.warn(
            "this chromadb's HTTP client has no httpx session to add retries to: requests to the memory "
            "server are sent once",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    # Clients of one host and port share a session (chromadb caches one system per server).
    if isinstance(transport, RetryTransport):
        transport.budget_s = budget_s
    else:
        session._transport = RetryTransport(transport, budget_s)
    mounts = getattr(session, "_mounts", {})
    for pattern, mounted in list(mounts.items()):  # proxies from the environment
        if isinstance(mounted, RetryTransport):
            mounted.budget_s = budget_s
        elif mounted is not None:
            mounts[pattern] = RetryTransport(mounted, budget_s)
    return True
