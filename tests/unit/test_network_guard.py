"""The session's network guard (tests/network_guard.py, active through tests/conftest.py): connections
to anything but loopback are refused at once, through raw sockets and HTTP clients alike; loopback and
unix sockets still work."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from tests.network_guard import NetworkRefused, is_loopback

PUBLIC = [("192.0.2.1", 80), ("8.8.8.8", 53), ("10.1.2.3", 443), ("example.com", 443)]


@pytest.mark.parametrize("address", PUBLIC, ids=lambda a: a[0])
def test_connections_off_the_machine_are_refused_at_once(address):
    t0 = time.monotonic()
    with pytest.raises(NetworkRefused, match="tests may not reach the network"):
        socket.create_connection(address, timeout=5)
    if address[0][0].isdigit():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            with pytest.raises(NetworkRefused):
                s.connect(address)
            with pytest.raises(NetworkRefused):
                s.connect_ex(address)
    assert time.monotonic() - t0 < 1  # refused before any name lookup or packet


def test_an_http_client_is_refused_too():
    with pytest.raises(httpx.ConnectError, match="tests may not reach the network"):
        httpx.get("https://example.com/", timeout=5)


def test_loopback_still_connects():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        accepted: list[bytes] = []

        def serve() -> None:
            conn, _ = server.accept()
            with conn:
                accepted.append(conn.recv(5))

        thread = threading.Thread(target=serve)
        thread.start()
        with socket.create_connection(("localhost", port), timeout=5) as client:
            client.sendall(b"hello")
        thread.join(timeout=5)
    assert accepted == [b"hello"]


def test_unix_sockets_are_untouched(tmp_path):
    path = str(tmp_path / "sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen(1)
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(path)


@pytest.mark.parametrize(
    "address,loopback",
    [
        (("127.0.0.1", 1), True),
        (("127.3.4.5", 1), True),
        (("localhost", 1), True),
        (("::1", 1, 0, 0), True),
        (("::ffff:127.0.0.1", 1, 0, 0), True),
        (("0.0.0.0", 1), False),
        (("::", 1, 0, 0), False),
        (("192.168.1.1", 1), False),
        (("localhost.example.com", 1), False),
        ("/tmp/some.sock", True),
    ],
)
def test_what_counts_as_loopback(address, loopback):
    assert is_loopback(address) is loopback
