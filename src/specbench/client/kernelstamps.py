"""The kernel's receive time of each socket read (Linux ``SO_TIMESTAMPNS``), for readstamps.py.

A socket whose class is switched to ``KernelStampSocket`` reads with ``recvmsg`` and leaves the
receive time of the read's last bytes in a thread-local (``ARRIVAL``) for the protocol's
``data_received``, which the event loop calls right after. ``kernel_stamping`` switches the
kernel's stamping on for the process, before any request, and waits until it works.
"""

from __future__ import annotations

import functools
import platform
import socket
import struct
import sys
import threading
import time
from typing import Any

# Linux's SO_TIMESTAMPNS (== SCM_TIMESTAMPNS) where the generic socket numbers apply; the socket
# module does not name it. Alpha, MIPS, PA-RISC and SPARC number it otherwise: poll stamps there.
_SO_TIMESTAMPNS = 35
_GENERIC = {"x86_64", "amd64", "aarch64", "arm64", "riscv64", "s390x", "ppc64le", "loongarch64"}
KERNEL_STAMPS = sys.platform == "linux" and platform.machine().lower() in _GENERIC and sys.maxsize > 2**32
_ANC_SIZE = socket.CMSG_SPACE(16) if KERNEL_STAMPS else 0  # one struct timespec (two int64)
_timespec = struct.Struct("qq").unpack_from


class _Arrival(threading.local):
    """The kernel's receive time (wall clock, ns) of the last bytes this thread's last read took
    (0 where the read carried none), and the socket read. A loop's read callback calls ``recv``
    and then the protocol's ``data_received`` back to back, so a protocol takes the stamp only
    when it is its own socket's (a TLS layer or aiohttp may hand bytes over later)."""

    real_ns = 0
    sock: socket.socket | None = None


ARRIVAL = _Arrival()


class KernelStampSocket(socket.socket):
    """A socket whose reads also keep the kernel's receive time (``ARRIVAL``). Same layout as
    ``socket.socket``, so an open socket's class can be switched (``kernel_stamps``)."""

    __slots__ = ()

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, anc, _, _ = self.recvmsg(bufsize, _ANC_SIZE, flags)
        arrival = ARRIVAL
        arrival.real_ns, arrival.sock = _stamp(anc), self
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:  # SSL transports
        view = memoryview(buffer)
        n, anc, _, _ = self.recvmsg_into([view[:nbytes] if nbytes else view], _ANC_SIZE, flags)
        arrival = ARRIVAL
        arrival.real_ns, arrival.sock = _stamp(anc), self
        return n


def _stamp(anc: list[tuple[int, int, bytes]]) -> int:
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = _timespec(data)
            return int(sec) * 1_000_000_000 + int(nsec)
    return 0


def kernel_stamps(transport: Any) -> socket.socket | None:
    """Have ``transport``'s socket keep the kernel's receive time of each read, and return it;
    None where it cannot (another platform or loop, a socket asyncio does not hand out as a plain
    ``socket.socket``)."""
    if not KERNEL_STAMPS:
        return None
    wrapped = transport.get_extra_info("socket")
    sock = getattr(wrapped, "_sock", wrapped)  # asyncio hands out a TransportSocket around it
    if type(sock) is KernelStampSocket:  # a second protocol on the same socket (TLS via a proxy)
        return sock
    if type(sock) is not socket.socket:
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return None
    sock.__class__ = KernelStampSocket
    return sock


_KEEPER: list[socket.socket] = []  # holds the kernel's receive timestamping on (kernel_stamping)


@functools.cache
def kernel_stamping(wait_s: float = 5.0) -> bool:
    """Switch the kernel's receive timestamps on for the rest of this process, and wait (at most
    ``wait_s``) until a loopback TCP read carries one. The kernel starts stamping only after the
    first socket asks for it (deferred: up to 2.5 s seen on a 2-core VM) and stops once the last
    one closes, so without this the first reads of a session carry none (issue #41). The socket
    that holds it on is one UDP socket, never bound; False where no stamp came (other kernels)."""
    try:
        keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        keeper.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        _KEEPER.append(keeper)
        with (
            socket.create_server(("127.0.0.1", 0)) as server,
            socket.create_connection(server.getsockname(), timeout=wait_s) as out,
            server.accept()[0] as peer,
        ):
            peer.settimeout(wait_s)
            peer.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            return _probe(out, peer, time.monotonic() + wait_s)
    except OSError:
        return False


def _probe(out: socket.socket, peer: socket.socket, deadline: float) -> bool:
    """Send a byte from ``out`` to ``peer`` until it comes with a receive time, or ``deadline``."""
    while True:
        out.send(b"x")
        if _stamp(peer.recvmsg(1, _ANC_SIZE)[1]):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
