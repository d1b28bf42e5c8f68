"""The floor of the timestamp error on this machine: a client that does nothing but read.

bench/client_overhead.py compares each client's chunk gaps with the true gaps of
bench/stream_server.py (every chunk carries the server's ``perf_counter_ns`` taken just before its
write). Part of that error is not any client's: the server itself can be held between its stamp
and its write (the scheduler, a hypervisor taking the virtual CPU), and a read that comes late
takes several chunks at once. This client shows how much: ``c`` keep-alive sockets, plain
blocking-free ``recvmsg`` off one ``selectors`` loop, each read stamped with the kernel's receive
time (Linux ``SO_TIMESTAMPNS``, else the time the read returned), no HTTP or JSON parsing, nothing
else on its loop. Its records are written as specbench's are (one JSON line per request with
``chunks: [[t_ns, "@<sent>"], ...]``), so the same error definition applies. Not a load generator
anyone should use: it knows only this server's framing.

    python bench/client_floor.py URL C N TOKENS OUT_DIR
"""

from __future__ import annotations

import json
import re
import selectors
import socket
import struct
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

# Its own few lines of kernel-stamp reading, not specbench's readstamps.py: a yardstick for the
# client must not share the client's code (a mistake there would then move both figures alike).
SO_TIMESTAMPNS = 35  # Linux, generic socket numbers (x86-64, arm64)
ANC = socket.CMSG_SPACE(16)
_SENT = re.compile(rb"@(\d+)[^\d]")
_END = b"data: [DONE]"


def offset() -> int:
    """Wall clock minus perf_counter, from the tightest of a few back-to-back reads."""
    best = min(
        (
            (b - a, r - (a + b) // 2)
            for a, r, b in (
                (time.perf_counter_ns(), time.time_ns(), time.perf_counter_ns()) for _ in range(20)
            )
        ),
    )
    return best[1]


class Stream:
    def __init__(self, sock: socket.socket, request: bytes) -> None:
        self.sock, self.request = sock, request
        self.start()

    def start(self) -> None:
        self.buf, self.pos, self.chunks = b"", 0, []
        self.t0 = time.perf_counter_ns()
        self.sock.sendall(self.request)

    def read(self, off: int) -> bool:
        """One read; True when the response is complete."""
        data, anc, _, _ = self.sock.recvmsg(262144, ANC)
        now = time.perf_counter_ns()
        stamp = now
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack_from("qq", raw)
                stamp = sec * 1_000_000_000 + nsec - off
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data
        for m in _SENT.finditer(self.buf, self.pos):
            self.chunks.append([stamp - self.t0, "@" + m.group(1).decode()])
            self.pos = m.end() - 1
        return _END in self.buf[-64:] or _END in data


def main(url: str, c: int, n: int, tokens: int, out: Path) -> None:
    parts = urlsplit(url)
    body = json.dumps(
        {
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": tokens,
            "stream": True,
            "ignore_eos": True,
        }
    ).encode()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (parts.netloc.encode(), len(body), body)
    )
    sel = selectors.DefaultSelector()
    started = done = 0
    with (out / "records.jsonl").open("w") as sink:
        for _ in range(min(c, n)):
            sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if sys.platform == "linux":
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            sel.register(sock, selectors.EVENT_READ, Stream(sock, request))
            started += 1
        off = offset()
        while done < n:
            for key, _ in sel.select():
                stream: Stream = key.data
                if not stream.read(off):
                    continue
                done += 1
                sink.write(json.dumps({"chunks": stream.chunks}) + "\n")
                if started < n:
                    started += 1
                    stream.start()
                else:
                    sel.unregister(stream.sock)
                    stream.sock.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5]))
