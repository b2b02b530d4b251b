"""Memory on a Chroma server that fails: a real `chroma run`, restarted mid-write or behind a real HTTP
proxy on loopback that drops connections, answers 5xx, or passes a request on and loses the answer.

Every case, rule count and exposure ends exactly as written once (the same writes on a local folder
are the reference), also when a step the server failed part-way is made again; an HTTP 4xx is not sent
again; a server that stays down fails the write after the retry budget with one error naming the server
and the write.
"""

from __future__ import annotations

import http.client
import logging
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings

from kernelwright.hardware.result import Versions
from kernelwright.memory import Case, Memory, MemoryServerError, RuleCandidate, http_retry, open_memory
from kernelwright.memory.graph import CASES
from kernelwright.memory.rules import EXPOSURES, RULES
from kernelwright.tasks.task import TaskSignature
from tests.integration.conftest import ChromaServer, running_chroma

SIG = TaskSignature(
    op_families=["matmul"], ops=["aten.mm"], input_shapes=[[5, 123]], input_dtypes=["float32"]
)
V = Versions(torch="2.13.0", triton="3.6.0")
RULE = "You cannot use tl.dot with block dimensions below 16"
WRITES = ("/add", "/upsert", "/update", "/delete")

Fault = str
"""What the proxy does with one request: "" passes it on; "close" closes the connection unanswered,
"reset" resets it, "502"/"503"/"504" answer that status, "lost" passes it on and then resets the
connection instead of answering (the request landed, its answer did not), "400" answers a Chroma error."""


class FaultProxy:
    """An HTTP/1.1 proxy on a free loopback port in front of the Chroma server; `decide(method, path, n)`
    picks the fault for the n-th request (from 0); `log` keeps (method, path, fault) of each."""

    def __init__(self, upstream_port: int, decide: Callable[[str, str, int], Fault]) -> None:
        self.decide = decide
        self.log: list[tuple[str, str, Fault]] = []
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes: without this, Nagle's algorithm and the
                # client's delayed ACK hold each answer back 40 ms.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _reset(self) -> None:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
                self.close_connection = True

            def _answer(self, status: int, body: bytes, headers: list[tuple[str, str]] = ()) -> None:
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    fault = proxy.decide(self.command, self.path, len(proxy.log))
                    proxy.log.append((self.command, self.path, fault))
                if fault == "close":
                    self.close_connection = True
                    return
                if fault == "reset":
                    return self._reset()
                if fault in ("502", "503", "504"):
                    return self._answer(int(fault), b"upstream unavailable", [("Content-Type", "text/plain")])
                if fault == "400":
                    body400 = b'{"error":"InvalidArgumentError","message":"refused by the test proxy"}'
                    return self._answer(400, body400, [("Content-Type", "application/json")])
                up = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
                try:
                    headers = {
                        k: v for k, v in self.headers.items() if k.lower() not in ("connection", "host")
                    }
                    up.request(self.command, self.path, body=body, headers=headers)
                    resp = up.getresponse()
                    data = resp.read()
                    kept = [
                        (k, v)
                        for k, v in resp.getheaders()
                        if k.lower()
                        not in ("connection", "transfer-encoding", "content-length", "keep-alive")
                    ]
                finally:
                    up.close()
                if fault == "lost":
                    return self._reset()
                self._answer(resp.status, data, kept)

            do_GET = do_POST = do_PUT = do_DELETE = _any  # noqa: N815 - http.server's names

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    def faults(self) -> list[Fault]:
        return [f for _, _, f in self.log if f]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    """One server for the module (a start costs most of a test); each test finds it empty."""
    with running_chroma(tmp_path_factory.mktemp("chroma")) as server:
        yield server


@pytest.fixture(autouse=True)
def empty_server(chroma: ChromaServer) -> None:
    client = _client(chroma.url)
    for col in client.list_collections():
        client.delete_collection(col.name)


@pytest.fixture
def proxy(chroma: ChromaServer) -> Iterator[FaultProxy]:
    p = FaultProxy(chroma.port, lambda method, path, n: "")
    try:
        yield p
    finally:
        p.close()


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries start after ~5 ms instead of ~50 ms: the same path, a fraction of the time."""
    monkeypatch.setattr(http_retry, "FIRST_DELAY_S", 0.005)


def _case(tag: str, i: int, parent: Case | None) -> Case:
    case = Case.from_attempt(
        signature=SIG,
        code=f"# {tag} {i}",
        correct=i % 3 != 2,
        speedup=1.0 + i / 10,
        parent=parent,
        hardware="h",
    )
    case.id = f"case-{tag}-n{i}"  # as the reflector does: fixed by the run and node before the write
    return case


def write_step(mem: Memory, tag: str, i: int) -> None:
    """What a run's reflector writes for one attempt (nodes/reflector.reflect_to_memory): its case, on a
    chain, unless it is there already; a rule observation; the attempt's exposure."""
    case = _case(tag, i, mem.cases.get(f"case-{tag}-n{i - 1}"))
    if mem.cases.get(case.id) is None:
        mem.cases.add(case)
    mem.rules.add(
        RuleCandidate(
            text=RULE,
            error_kind="compile_error",
            error=f"AssertionError: first input shape ([constexpr[{i % 4 + 2}]]) must be >= 16!",
            op_families=["matmul"],
            versions=V,
            case_id=case.id,
        )
    )
    mem.rules.record_rule_exposure([], failed=i % 2 == 1, op_families=["matmul"], case_id=case.id, run_id=tag)


def write_steps(
    mem: Memory, tag: str, steps: int, *, before_step: Callable[[int], None] = lambda i: None
) -> None:
    for i in range(steps):
        before_step(i)
        write_step(mem, tag, i)


def contents(url_or_dir: str) -> dict[str, Any]:
    """What a memory holds, without the times and random ids two writers of the same steps differ in."""
    with open_memory(url_or_dir) as mem:
        cases = {c.id: (c.parent_id, round(c.downstream, 9), c.outcome) for c in mem.cases.iter_all()}
        rules = sorted((r.text, r.count, len(r.evidence)) for r in mem.rules.all())
        exposures = sorted((e.case_id, e.failed) for e in mem.rules.exposures())
    return {"cases": cases, "rules": rules, "exposures": exposures}


def _client(url: str) -> Any:
    port = int(url.rsplit(":", 1)[1])
    return chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False))


def collections_at(url: str) -> set[str]:
    return {c.name for c in _client(url).list_collections()}


def test_every_request_failing_once_loses_and_repeats_nothing(
    chroma: ChromaServer, proxy: FaultProxy, tmp_path: Path
) -> None:
    """Each request through the proxy fails once and is sent again: a write first lands and loses its
    answer (the worst case for a repeat: a lock created twice, a count raised twice), a read meets each of
    the other faults in turn. The memory ends exactly as the same steps leave a local folder."""
    reads = ["close", "reset", "502", "503", "504", "lost"]

    def every_request_once(method: str, path: str, n: int) -> Fault:
        if n % 2:
            return ""  # the retry of the request before
        write = method in ("PUT", "DELETE") or path.endswith(WRITES) or path.endswith("/collections")
        return "lost" if write else reads[(n // 2) % len(reads)]

    with open_memory(proxy.url) as mem:
        proxy.decide = every_request_once
        write_steps(mem, "faulty", 3)
    proxy.decide = lambda method, path, n: ""

    with open_memory(tmp_path / "reference") as ref:
        write_steps(ref, "faulty", 3)
    got = contents(chroma.url)
    assert got == contents(str(tmp_path / "reference"))
    assert got["rules"] == [(RULE, 3, 3)] and len(got["cases"]) == 3 and len(got["exposures"]) == 3
    # The lock was taken and released each time (nothing left behind), and every kind of fault happened.
    assert collections_at(chroma.url) == {CASES, RULES, EXPOSURES}
    lost_writes = [p for m, p, f in proxy.log if f == "lost" and (m != "POST" or p.endswith(WRITES))]
    assert any(p.endswith("/collections") for _, p, f in proxy.log if f == "lost")  # the lock's create
    assert len(lost_writes) >= 3 * 3 and set(proxy.faults()) == set(reads)


def test_a_server_restart_mid_bench_loses_and_repeats_nothing(
    chroma: ChromaServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stops (connections refused) in the middle of the steps and starts again 0.1 s later;
    the outage is announced (here after 0.05 s) and so is its end."""
    monkeypatch.setattr(http_retry, "ANNOUNCE_AFTER_S", 0.05)
    monkeypatch.setattr(logging.getLogger("kernelwright.wait"), "propagate", True)  # as the CLI may not
    caplog.set_level(logging.INFO, logger="kernelwright.wait")
    restarts: list[threading.Thread] = []

    def restart_before_step_2(i: int) -> None:
        if i == 2:
            chroma.stop()
            restarts.append(threading.Timer(0.1, chroma.start))
            restarts[0].start()

    with open_memory(chroma.url) as mem:
        write_steps(mem, "restart", 4, before_step=restart_before_step_2)
    restarts[0].join()
    lines = [r.getMessage() for r in caplog.records if r.name == "kernelwright.wait.memory"]
    server = f"memory server {chroma.url}"
    down = [line for line in lines if line.startswith(f"{server}: ") and "no answer for" in line]
    assert down and "ConnectError" in down[0] and "again for up to" in down[0], lines
    assert re.fullmatch(rf"{re.escape(server)} answered again after \d+\.\d s \(\d+ tries\)", lines[-1])
    with open_memory(tmp_path / "reference") as ref:
        write_steps(ref, "restart", 4)
    assert contents(chroma.url) == contents(str(tmp_path / "reference"))
    assert collections_at(chroma.url) == {CASES, RULES, EXPOSURES}


def test_a_short_blip_is_not_announced(
    proxy: FaultProxy, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logging.getLogger("kernelwright.wait"), "propagate", True)
    caplog.set_level(logging.INFO, logger="kernelwright.wait")
    with open_memory(proxy.url) as mem:
        proxy.decide = lambda method, path, n: "reset" if n % 2 == 0 else ""
        write_steps(mem, "blip", 2)
    assert [f for _, _, f in proxy.log].count("reset") >= 4
    assert not [r for r in caplog.records if r.name.startswith("kernelwright.wait")]


def test_a_write_repeated_after_it_failed_part_way_counts_once(
    chroma: ChromaServer, proxy: FaultProxy, tmp_path: Path
) -> None:
    """The rule's count lands on every try but no answer comes back until the budget is spent: the step
    fails after its case and count were written. Made again (as a resumed run makes it), it raises no
    count and adds no case or exposure twice."""
    with open_memory(proxy.url, retry_s=0.3) as mem:
        write_step(mem, "again", 0)
        rules_upsert = f"{_client(chroma.url).get_collection(RULES).id}/upsert"
        proxy.decide = lambda method, path, n: "lost" if path.endswith(rules_upsert) else ""
        with pytest.raises(MemoryServerError, match=r"while storing rule rule-\w+ \(count 2\)"):
            write_step(mem, "again", 1)
        proxy.decide = lambda method, path, n: ""
        write_step(mem, "again", 1)
    with open_memory(tmp_path / "reference") as ref:
        write_steps(ref, "again", 2)
    assert contents(chroma.url) == contents(str(tmp_path / "reference"))
    assert [p for _, p, f in proxy.log if f == "lost"] and contents(chroma.url)["rules"] == [(RULE, 2, 2)]


def test_an_http_4xx_is_not_sent_again(proxy: FaultProxy) -> None:
    with open_memory(proxy.url) as mem:
        proxy.decide = lambda method, path, n: "400" if path.endswith("/upsert") else ""
        with pytest.raises(MemoryServerError) as err:
            mem.rules.record_rule_exposure([], failed=True, op_families=["matmul"], case_id="case-x")
        proxy.decide = lambda method, path, n: ""
        assert mem.rules.exposure_count() == 0
    assert [p for _, p, _ in proxy.log].count(next(p for _, p, f in proxy.log if f == "400")) == 1
    message = str(err.value)
    assert proxy.url in message and "recording exposure exp-" in message
    assert (
        "InvalidArgumentError" in message
        and "refused by the test proxy" in message
        and "not retried" in message
    )


def test_a_server_that_stays_down_fails_the_write_after_the_budget(proxy: FaultProxy) -> None:
    with open_memory(proxy.url, retry_s=0.5) as mem:
        proxy.decide = lambda method, path, n: "503"
        case = _case("down", 0, None)
        start = time.monotonic()
        with pytest.raises(MemoryServerError) as err:
            mem.cases.add(case)
        elapsed = time.monotonic() - start
        proxy.decide = lambda method, path, n: ""
        mem.cases.add(case)  # nothing of the failed write landed; it goes through once the server is back
        assert mem.cases.count() == 1
    message = str(err.value)
    assert 0.5 <= elapsed < 2.0, elapsed
    assert f"the Chroma server at {proxy.url} did not answer while adding case {case.id}" in message
    assert "HTTP 503" in message and "KERNELWRIGHT_MEMORY_RETRY_S" in message
    assert len(proxy.faults()) > 3


def test_the_retry_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(http_retry.ENV_RETRY_S, "7.5")
    assert http_retry.retry_budget() == 7.5 and http_retry.retry_budget(2) == 2.0
    monkeypatch.setenv(http_retry.ENV_RETRY_S, "soon")
    with pytest.raises(ValueError, match="KERNELWRIGHT_MEMORY_RETRY_S"):
        http_retry.retry_budget()
    monkeypatch.delenv(http_retry.ENV_RETRY_S)
    assert http_retry.retry_budget() == http_retry.DEFAULT_RETRY_S == 60.0


def test_an_optimize_run_stopped_by_the_memory_server_resumes_where_it_stopped(
    proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server refuses every write (503) past the retry budget: the run stops at its last checkpoint
    with exit 3 and the command to continue it; once the server is back, --resume finishes it and its
    cases are in the server's memory."""
    from kernelwright.cli.main import main as cli_main

    monkeypatch.setenv(http_retry.ENV_RETRY_S, "0.3")
    down = {"writes": True}
    proxy.decide = lambda method, path, n: "503" if down["writes"] and path.endswith(WRITES) else ""
    task = Path(__file__).resolve().parents[1] / "kernels" / "candidates" / "task_relu.py"
    out = tmp_path / "run"
    args = ["--model", "offline", "--budget", "1", "--device", "cpu", "--memory", proxy.url]
    assert cli_main(["optimize", str(task), *args, "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert proxy.url in err and f"continue it with kernelwright optimize --resume {out}" in err, err
    assert "503" in proxy.faults()
    down["writes"] = False
    assert cli_main(["optimize", "--resume", str(out)]) == 0, capsys.readouterr().err
    assert (out / "result.json").is_file()
    mem = open_memory(proxy.url)
    try:
        assert mem.stats().cases >= 1  # the resumed run wrote its case
    finally:
        mem.close()
