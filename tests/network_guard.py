"""Keeps tests off the network: while `refuse_non_loopback()` is active, every connection from this
process to an address that is not loopback (127.0.0.0/8, ::1, localhost) fails at once with
NetworkRefused, before any name is resolved or any packet is sent. Unix sockets are not touched.

tests/conftest.py holds it active for the whole session. Subprocesses a test starts are separate
interpreters and are not covered.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

IP_FAMILIES = (socket.AF_INET, socket.AF_INET6)  # unix and netlink sockets never leave the machine
LOOPBACK_NAMES = ("localhost", "localhost.", "ip6-localhost")


class NetworkRefused(OSError):
    """A test tried to reach a host that is not this machine."""


def is_loopback(address: Any) -> bool:
    """True for a unix socket address or a (host, port, ...) tuple whose host is loopback."""
    if isinstance(address, str | bytes):  # AF_UNIX: a path or an abstract name
        return True
    if not isinstance(address, tuple) or not address:
        return False
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode()
    if not isinstance(host, str):
        return False
    host = host.split("%", 1)[0]  # an IPv6 scope id
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False  # any other name would be resolved, and could be anywhere
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _refuse(address: Any) -> None:
    raise NetworkRefused(f"tests may not reach the network: a connection to {address!r} was refused")


@contextlib.contextmanager
def refuse_non_loopback() -> Iterator[None]:
    """Patches socket.socket.connect, connect_ex and socket.create_connection (which every HTTP client in
    this process goes through) for as long as it is active."""
    connect, connect_ex, create_connection = (
        socket.socket.connect,
        socket.socket.connect_ex,
        socket.create_connection,
    )

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if self.family in IP_FAMILIES and not is_loopback(address):
            _refuse(address)
        return connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        if self.family in IP_FAMILIES and not is_loopback(address):
            _refuse(address)
        return connect_ex(self, address)

    def guarded_create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if not is_loopback(address):
            _refuse(address)
        return create_connection(address, *args, **kwargs)

    socket.socket.connect = guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign]
    socket.create_connection = guarded_create_connection  # type: ignore[assignment]
    try:
        yield
    finally:
        socket.socket.connect = connect  # type: ignore[method-assign]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
        socket.create_connection = create_connection
