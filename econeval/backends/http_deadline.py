"""A whole-request deadline for httpx's synchronous client.

httpx's timeouts bound each read and write, not the request (encode/httpx#1450): a server that
sends a byte a second never times out, in its headers or its body. Inside `deadline(seconds)`,
every name lookup, connect, TLS handshake, read and write of this thread gets at most the time left until then,
and a timeout once it has passed, so a request ends in time whatever the server drips. It works
below httpx, as the network backend of the client's connection pools (`install`), because a
blocked read cannot be cut short from above; httpcore's own timeout errors carry it back up, so
httpx raises its usual `ReadTimeout` / `ConnectTimeout` / `WriteTimeout`. httpcore is imported
only when a deadline passes (econeval's start does not load it): the stream and backend here have
its interface, not its classes.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

_local = threading.local()  # the deadline of the request this thread is making (a sync request runs in its caller's thread)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """The requests made in this block, together, within `seconds` (a deadline already set stays if sooner)."""
    before = getattr(_local, "at", None)
    at = time.monotonic() + seconds
    _local.at = at if before is None else min(at, before)
    try:
        yield
    finally:
        _local.at = before


def _left(timeout: float | None, error: str) -> float | None:
    """An operation's timeout: its own, or less where the deadline is sooner; httpcore's `error`
    (ReadTimeout, WriteTimeout, ConnectTimeout) when it has passed."""
    at = getattr(_local, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        import httpcore

        raise getattr(httpcore, error)("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class _Stream:
    """An httpcore network stream whose every operation ends by the deadline."""

    def __init__(self, inner: Any):
        self.inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, _left(timeout, "ReadTimeout"))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, _left(timeout, "WriteTimeout"))

    def close(self) -> None:
        self.inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> "_Stream":
        return _Stream(self.inner.start_tls(ssl_context, server_hostname, _left(timeout, "ConnectTimeout")))

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class _Backend:
    """An httpcore network backend whose connections are `_Stream`s."""

    def __init__(self, inner: Any):
        self.inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> _Stream:
        """A connection to the first of the host's addresses that takes one: the name looked up
        within the time left too (a resolver that does not answer would hold the request for its
        own timeouts and retries, outside any deadline). TLS is then started with the host's name
        (httpcore passes it to start_tls), so connecting to its address changes nothing else."""
        error: Exception | None = None
        for address in _addresses(host, port, _left(timeout, "ConnectTimeout")):
            try:
                return _Stream(self.inner.connect_tcp(address, port, _left(timeout, "ConnectTimeout"), local_address,
                                                      socket_options))
            except Exception as exc:  # noqa: BLE001 - the next address, as socket.create_connection tries them
                error = exc
        assert error is not None
        raise error

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> _Stream:
        return _Stream(self.inner.connect_unix_socket(path, _left(timeout, "ConnectTimeout"), socket_options))

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


def _addresses(host: str, port: int, timeout: float | None) -> list[str]:
    """The host's addresses in the resolver's order (an address literal is its own), the lookup
    given at most `timeout` seconds: it runs in a daemon thread, left to end on its own when the
    time is up (getaddrinfo cannot be cut short), and httpcore's ConnectTimeout is raised here."""
    import ipaddress
    import socket

    try:
        ipaddress.ip_address(host)
        return [host]
    except ValueError:
        pass
    found: list = []

    def look_up() -> None:
        try:
            found.append([info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)])
        except OSError as exc:
            found.append(exc)

    worker = threading.Thread(target=look_up, daemon=True, name="econeval-dns")
    worker.start()
    worker.join(timeout)
    import httpcore

    if not found:
        raise httpcore.ConnectTimeout(f"looking up {host} took longer than {timeout:g} s")
    if isinstance(found[0], OSError):
        raise httpcore.ConnectError(str(found[0]))
    return list(dict.fromkeys(found[0])) or [host]


def install(client: Any) -> int:
    """Put the connection pools of an httpx.Client (its transport and those of the proxies the
    environment names) behind the deadline; returns how many. httpx offers no way to name a pool's
    network backend, so its transports' pools are reached as they are built (httpx 0.27 and later:
    `_transport`, `_mounts`, each pool's `_network_backend`)."""
    n = 0
    for transport in [getattr(client, "_transport", None), *getattr(client, "_mounts", {}).values()]:
        pool: Any = getattr(transport, "_pool", None)
        inner = getattr(pool, "_network_backend", None)
        if inner is not None and not isinstance(inner, _Backend):
            pool._network_backend = _Backend(inner)
            n += 1
    return n
