"""Where memory lives: a Chroma client (a local folder or a Chroma server) shared by several processes.

Chroma's local mode keeps each collection's vector index in the memory of the process that opened it
and writes it back to disk from there. Two processes writing to one folder therefore overwrite each
other's index entries (measured: 10,000 concurrent adds left 30 out of the index, and filtered queries
failed). `ChromaStore` makes that safe:

- every write happens under an exclusive `fcntl` lock on `<dir>/.kernelwright.lock`;
- every write bumps a generation number in `<dir>/.kernelwright.generation`;
- before any read or write, a process whose last-seen generation is older reopens its client, which
  reloads the index from disk and replays the write log, so it sees (and never overwrites) what other
  processes wrote.

Reopening costs only when another process wrote in between. A Chroma server (`http://host:port`) keeps
one index for all its clients, so it needs no generation; but it runs each request on its own, and a
client's read-modify-write (a rule's count, the downstream scores of a case's ancestors) would interleave
with another's and lose updates (measured: four writers raising one rule's count 24 times left it at 17).
So a write also holds a lock on the server, taken by creating a collection (`_lock_server`).

A server's requests that fail transiently (it restarts, a connection drops, a proxy answers 502-504) are
sent again for up to KERNELWRIGHT_MEMORY_RETRY_S seconds (memory/http_retry.py); then, and for any answer
that is an error (an HTTP 4xx: never sent again), the read or write raises MemoryServerError naming the
server and what was being written. A request sent again may have landed the first time, so every
request memory sends is one that may be repeated: records are written whole under ids fixed before the
write (a case's id comes from its run and node, an exposure's from its case), counts and scores as the
absolute values read and computed under the lock (a rule's count, a case's downstream score), and the
lock itself is taken under a token of this acquisition (a create that landed but was not answered is
found to be ours) and released by renaming the lock collection, found by its id, to a name of its own
before deleting it (a repeated delete by name could remove the lock another client took in between).

A folder this process cannot write (permissions, a read-only mount) is opened from a snapshot copied to
a temporary folder: everything can be read, a write raises MemoryLocationError. A damaged folder (the
database missing, truncated or overwritten) raises MemoryDamagedError naming what can be recovered
(memory/damage.py), never an empty memory.

Within a process all Memory objects on one folder share one store (Chroma shares one system per path,
so a second client would not reload independently); a thread lock serialises access.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import chromadb
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings

from kernelwright.memory import http_retry
from kernelwright.memory.damage import damaged_message, empty_database, missing_database, sqlite_problem
from kernelwright.memory.embedding import Embedder
from kernelwright.memory.http_retry import ServerUnavailable

ENV_MEMORY = "KERNELWRIGHT_MEMORY"
DEFAULT_MEMORY_DIR = "~/.kernelwright"
LOCK_FILE = ".kernelwright.lock"
SERVER_LOCK = "kernelwright_write_lock"
"""On a Chroma server, the collection that exists while one client writes (ChromaStore._lock_server)."""
SERVER_LOCK_STALE_S = 120.0
"""A server lock older than this is taken to be left by a client that died mid-write, and broken."""
GENERATION_FILE = ".kernelwright.generation"
STORE_SCHEMA = 1


class MemoryLocationError(ValueError):
    """The memory location cannot be used (bad URL, unreachable server, not a folder, wrong embedding)."""


class MemoryDamagedError(MemoryLocationError):
    """The memory folder's database is missing, truncated or overwritten; the message says what can be
    recovered (see memory/damage.py)."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class MemoryServerError(MemoryLocationError):
    """A Chroma server that stayed unreachable through the retries, or answered a read or write with an
    error; the message names the server and what was being read or written. Raised inside a run, it stops
    the run at its last checkpoint: `run_dir` is then the run to resume (set by the caller that knows it)."""

    run_dir: str | None = None


def _writable(path: Path) -> bool:
    db = path / "chroma.sqlite3"
    return os.access(path, os.W_OK | os.X_OK) and (not db.exists() or os.access(db, os.W_OK))


def _snapshot(path: Path) -> str:
    """A private, writable copy of a memory folder this process cannot write. The copy's modes are made
    writable: Chroma writes to its database even to read it (a read-only file fails with "attempt to write
    a readonly database"), and copying keeps the original's read-only modes."""
    snap = tempfile.mkdtemp(prefix="kernelwright-memory-")
    try:
        shutil.copytree(path, snap, dirs_exist_ok=True)
    except (OSError, shutil.Error) as exc:
        shutil.rmtree(snap, ignore_errors=True)
        raise MemoryLocationError(f"cannot read the memory at {path}: {exc}") from exc
    for root, _dirs, files in os.walk(snap):
        os.chmod(root, 0o700)
        for name in files:
            os.chmod(os.path.join(root, name), 0o600)
    return snap


def resolve_location(location: str | os.PathLike[str] | None) -> str:
    """None -> $KERNELWRIGHT_MEMORY -> ~/.kernelwright; a URL stays a URL; a path becomes absolute."""
    raw = os.fspath(location) if location is not None else ""
    raw = raw.strip() or os.environ.get(ENV_MEMORY, "").strip() or DEFAULT_MEMORY_DIR
    if raw.startswith(("http://", "https://")):
        return raw.rstrip("/")
    return str(Path(raw).expanduser().resolve())


def _settings() -> Settings:
    # No usage reporting: memory must not reach the network.
    return Settings(anonymized_telemetry=False, allow_reset=False)


class ChromaStore:
    """One Chroma client and the collections memory uses, with cross-process write safety."""

    def __init__(self, location: str, embedder: Embedder, *, retry_s: float | None = None) -> None:
        self.location = location
        self.embedder = embedder
        self.remote = location.startswith(("http://", "https://"))
        self.retry_s = http_retry.retry_budget(retry_s) if self.remote else 0.0
        """For a server: seconds one request may take, retries of transient failures included."""
        self._server_lock: Collection | None = None
        self._thread_lock = threading.RLock()
        self._write_depth = 0
        self._lock_fd: int | None = None
        self._users = 0
        self._client: ClientAPI | None = None
        self._collections: dict[str, Collection] = {}
        self._generation = -1
        self.read_only = False
        """True for a folder this process cannot write: reads come from a snapshot, writes raise."""
        self._snapshot: str | None = None
        self.epoch = 0
        """Counts reconnects, i.e. times another process's writes were picked up (see `cache_token`)."""
        if self.remote:
            self._connect()
        else:
            path = Path(location)
            if path.exists() and not path.is_dir():
                raise MemoryLocationError(f"memory location {location} exists and is not a folder")
            missing = missing_database(path) or empty_database(path)
            if missing:
                raise MemoryDamagedError(missing, location)
            if path.exists() and not _writable(path):
                self.read_only = True
                self._snapshot = _snapshot(path)
            else:
                try:
                    path.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise MemoryLocationError(
                        f"cannot make the memory folder {location}: {exc.strerror}"
                    ) from exc
            self._generation = self._read_generation()
            self._connect()

    # -- connection ------------------------------------------------------------------------------

    def _connect(self) -> None:
        if self.remote:
            url = urlparse(self.location)
            if not url.hostname:
                raise MemoryLocationError(f"memory URL {self.location!r} has no host")
            port = url.port or (443 if url.scheme == "https" else 8000)
            try:
                with http_retry.retries_off():  # a server that is not there is said at once
                    client = chromadb.HttpClient(
                        host=url.hostname, port=port, ssl=url.scheme == "https", settings=_settings()
                    )
                    client.heartbeat()
            except Exception as exc:  # the HTTP client raises transport-specific types
                raise MemoryLocationError(
                    f"cannot reach the Chroma server at {self.location}: {exc}"
                ) from exc
            http_retry.install(client, self.retry_s)
            self._client = client
        else:
            try:
                self._client = chromadb.PersistentClient(
                    path=self._snapshot or self.location, settings=_settings()
                )
            except Exception as exc:  # Chroma raises its own internal types for a database it cannot use
                raise self._unusable(exc) from exc
        self._collections = {}

    def _damaged(self, exc: Exception) -> MemoryDamagedError | None:
        """For an error Chroma raised while reading or writing: the damage behind it, if any."""
        if (
            self.remote
            or isinstance(exc, MemoryLocationError)
            or not type(exc).__module__.startswith("chromadb")
        ):
            return None
        problem = sqlite_problem(Path(self.location))
        return (
            MemoryDamagedError(damaged_message(Path(self.location), problem), self.location)
            if problem
            else None
        )

    def _unusable(self, exc: Exception) -> MemoryLocationError:
        """What to raise when Chroma cannot open or read the folder: damaged, or why not."""
        problem = sqlite_problem(Path(self.location))
        if problem:
            return MemoryDamagedError(damaged_message(Path(self.location), problem), self.location)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return MemoryLocationError(f"cannot open the memory at {self.location}: {first}")

    def _reconnect(self) -> None:
        if self._client is not None:
            self._client.close()  # type: ignore[attr-defined]  # PersistentClient has it
        self._client = None
        self._connect()

    @property
    def client(self) -> ClientAPI:
        assert self._client is not None, "memory store is closed"
        return self._client

    def _read_generation(self) -> int:
        try:
            return int(Path(self.location, GENERATION_FILE).read_text() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def _refresh_if_stale(self) -> None:
        if self.remote or self.read_only:
            return
        gen = self._read_generation()
        if gen != self._generation:
            self._reconnect()
            self._generation = gen
            self.epoch += 1

    def _bump_generation(self) -> None:
        gen = self._read_generation() + 1
        tmp = Path(self.location, f"{GENERATION_FILE}.{os.getpid()}.tmp")
        tmp.write_text(str(gen))
        os.replace(tmp, Path(self.location, GENERATION_FILE))
        self._generation = gen

    # -- access ----------------------------------------------------------------------------------

    @contextmanager
    def _server_errors(self, doing: str) -> Iterator[None]:
        """A server's failure inside as one MemoryServerError naming the server and what was being done."""
        try:
            yield
        except ServerUnavailable as exc:
            raise MemoryServerError(
                f"the Chroma server at {self.location} did not answer while {doing}: {exc.tries} tries in "
                f"{exc.elapsed_s:.1f} s, the last: {exc.last} (requests are retried for "
                f"{self.retry_s:g} s; {http_retry.ENV_RETRY_S} sets it)"
            ) from exc
        except Exception as exc:
            # What the server answered with an error: Chroma's types, or a bare Exception with the body.
            kind = type(exc)
            if not self.remote or not (
                kind is Exception or kind.__module__.split(".")[0] in ("chromadb", "httpx")
            ):
                raise
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise MemoryServerError(
                f"the Chroma server at {self.location} failed while {doing} ({kind.__name__}, not "
                f"retried): {first}"
            ) from exc

    @contextmanager
    def reading(self, doing: str = "reading from it") -> Iterator[None]:
        """Serialise with other threads and pick up other processes' writes first."""
        with self._thread_lock, self._server_errors(doing):
            if self._write_depth == 0:
                self._refresh_if_stale()
            try:
                yield
            except Exception as exc:
                damaged = self._damaged(exc)
                if damaged is None:
                    raise
                raise damaged from exc

    @contextmanager
    def writing(self, doing: str = "writing to it") -> Iterator[None]:
        """Exclusive across processes (local folder) and threads; re-entrant within one thread.

        `doing` says what is written ("adding case case-...") in the error a server's failure raises."""
        if self.read_only:
            raise MemoryLocationError(f"memory at {self.location} is read-only: cannot write to it")
        with self._thread_lock, self._server_errors(doing):
            outer = self._write_depth == 0
            if outer and not self.remote:
                fd = os.open(Path(self.location, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._lock_fd = fd
                self._refresh_if_stale()
            elif outer:
                self._lock_server()
            self._write_depth += 1
            try:
                yield
            finally:
                self._write_depth -= 1
                if outer and self.remote:
                    self._unlock_server()
                if outer and self._lock_fd is not None:
                    try:
                        self._bump_generation()
                    finally:
                        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                        os.close(self._lock_fd)
                        self._lock_fd = None

    def _lock_server(self) -> None:
        """Exclusive across every client of a Chroma server: creating a collection is the server's one
        atomic test-and-set (a second create of one name fails), so the lock is a collection that exists
        while a client writes. Without it, two clients' read-modify-writes (a rule's count, a case's
        ancestors' scores) interleave and lose updates. A lock older than SERVER_LOCK_STALE_S (its holder
        died mid-write) is broken.

        The holder token is new for each acquisition: a create that landed but whose answer was lost is
        sent again (memory/http_retry.py), fails as "already exists", and the lock found holds our token."""
        client = self.client
        token = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:12]}"
        wait = 0.005
        while True:
            try:
                self._server_lock = client.create_collection(
                    SERVER_LOCK, metadata={"holder": token, "at": time.time()}
                )
                return
            except ServerUnavailable:
                raise
            except Exception as exc:  # the HTTP client raises the server's "already exists" as several types
                if "exist" not in str(exc).lower():
                    raise
            try:
                lock = client.get_collection(SERVER_LOCK)
            except ServerUnavailable:
                raise
            except Exception:  # released (or broken by another client) in between: try again at once
                continue
            meta = lock.metadata or {}
            if meta.get("holder") == token:
                self._server_lock = lock
                return
            if time.time() - float(meta.get("at", 0.0)) > SERVER_LOCK_STALE_S:
                self._drop_lock(lock)
                continue
            time.sleep(wait)
            wait = min(wait * 2, 0.2)

    def _drop_lock(self, lock: Collection) -> None:
        """Delete this lock collection and no other: renamed by its id to a name of its own, then deleted
        by that name, so a request sent again after it landed cannot delete a lock taken since."""
        gone = f"{SERVER_LOCK}-released-{uuid.uuid4().hex}"
        try:
            lock.modify(name=gone)
        except ServerUnavailable:
            raise
        except Exception:  # already renamed or deleted (broken as stale by another client)
            return
        try:
            self.client.delete_collection(gone)
        except ServerUnavailable:
            raise
        except Exception:  # deleted by a request that landed before its answer was lost
            pass

    def _unlock_server(self) -> None:
        lock, self._server_lock = self._server_lock, None
        if lock is None:
            return
        try:
            self._drop_lock(lock)
        except ServerUnavailable:  # the lock stays until it is stale (SERVER_LOCK_STALE_S); the write is done
            pass

    def cache_token(self) -> int | None:
        """Changes whenever any process wrote to this memory; None for a server (no such signal).

        Call inside `reading()`. Caches derived from stored data are valid while the token is unchanged.
        """
        return None if self.remote else self._generation

    def collection(self, name: str) -> Collection:
        """The named collection (created on first use) with memory's embedding function.

        Call inside `reading()` or `writing()`: a reconnect drops the cached collection objects.
        """
        col = self._collections.get(name)
        if col is None:
            meta: dict[str, Any] = {
                "kernelwright_schema": STORE_SCHEMA,
                "embedding": self.embedder.describe(),
            }
            try:
                col = self.client.get_or_create_collection(
                    name,
                    embedding_function=self.embedder,  # type: ignore[arg-type]
                    metadata=meta,
                    configuration={"hnsw": {"space": "cosine"}},
                )
            except ValueError as exc:
                raise MemoryLocationError(f"memory at {self.location}: collection {name}: {exc}") from exc
            except Exception as exc:  # a database Chroma opened but cannot read
                if self.remote:
                    raise
                raise self._unusable(exc) from exc
            found = (col.metadata or {}).get("embedding")
            if found and found != self.embedder.describe():
                raise MemoryLocationError(
                    f"memory at {self.location} was built with embedding {found!r}, not "
                    f"{self.embedder.describe()!r}; open it with embedding={found!r}"
                )
            self._collections[name] = col
        return col

    def max_batch(self) -> int:
        try:
            return max(1, min(5000, int(self.client.get_max_batch_size())))
        except ServerUnavailable:
            raise
        except Exception:  # older servers do not report it
            return 1000

    # -- lifetime --------------------------------------------------------------------------------

    def acquire(self) -> ChromaStore:
        with self._thread_lock:
            self._users += 1
        return self

    def release(self) -> None:
        with self._thread_lock:
            self._users -= 1
            if self._users <= 0 and self._client is not None:
                self._client.close()  # type: ignore[attr-defined]  # PersistentClient has it
                self._client = None
                self._collections = {}
                _STORES.pop(self.location, None)
                if self._snapshot:
                    shutil.rmtree(self._snapshot, ignore_errors=True)
                    self._snapshot = None


_STORES: dict[str, ChromaStore] = {}
_STORES_LOCK = threading.Lock()


def get_store(location: str, embedder: Embedder, *, retry_s: float | None = None) -> ChromaStore:
    """The process-wide store for a location (see the module docstring for why it is shared).

    `retry_s`: for a server, seconds a request may take with its retries (else
    $KERNELWRIGHT_MEMORY_RETRY_S, else 60); given for a store already open, it replaces its budget."""
    with _STORES_LOCK:
        store = _STORES.get(location)
        if store is None or store._client is None:
            store = ChromaStore(location, embedder, retry_s=retry_s)
            _STORES[location] = store
        elif store.embedder.describe() != embedder.describe():
            raise MemoryLocationError(
                f"memory at {location} is already open in this process with embedding "
                f"{store.embedder.describe()!r}, not {embedder.describe()!r}"
            )
        elif retry_s is not None and store.remote:
            store.retry_s = http_retry.retry_budget(retry_s)
            http_retry.install(store.client, store.retry_s)
        return store.acquire()
