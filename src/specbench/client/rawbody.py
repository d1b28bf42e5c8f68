"""A streamed response's body kept as it came off the socket: per read, a stamp and the bytes.

At 64 streams in flight a loop that runs aiohttp's parser, its payload buffer, a read-timeout
timer and a hand-over per read falls behind the server (0.88 of a 32,000 tok/s schedule on one
core, issue #41); reads it comes to late hold several chunks, which share the last one's arrival.
So once a response's headers say its body is chunked (every SSE server's), the connection stops
feeding aiohttp (readstamps.StampingHandler) and keeps each read here as it is: the stamp and the
bytes ``recv`` returned, nothing parsed. Only a read ending as a chunked body's end does
(``\\r\\n\\r\\n``) walks the chunk framing, from where the last walk stopped, to see whether the
body is whole; when it is, the chunk data is cut at the reads' boundaries (``pieces``: each read's
share of the decoded body with that read's stamp, what the aiohttp path yields) and the raw bytes
are handed to aiohttp in one go, so the response ends, errors and its connection's reuse are
aiohttp's as before.
"""

from __future__ import annotations

import re

Pieces = list[tuple[int, bytes]]
_TERMINATED = b"\r\n\r\n"  # the last chunk ("0\r\n") and the (empty) trailer section end so
# A chunk-size line: hex digits, extensions after ";" ignored (as aiohttp's parser does).
_HEADER = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?\r\n")


class RawBody:
    """One chunked body, read by read (``add``), until ``whole``."""

    __slots__ = ("_ends", "_k", "_r", "at", "base", "framed", "reads", "spans", "whole")

    def __init__(self) -> None:
        self.reads: Pieces = []  # (stamp, raw bytes) per read
        self.spans: list[tuple[int, int]] = []  # raw [start, end) of each chunk's data, in the body
        self.at = 0  # the read in which the next chunk-size line starts ...
        self.base = 0  # ... that read's offset in the body: the walk resumes at base + (spans' end)
        self.whole = False  # the last chunk and the trailer section came (or the framing is broken)
        self.framed = True  # False: broken chunk framing (aiohttp's parser then fails the response)
        # ``take``'s place: each read's end offset in the body so far, the next span, its read.
        self._ends: list[int] = []
        self._k = self._r = 0

    def add(self, t_ns: int, data: bytes) -> bool:
        """Keep one read; True once the body is whole. The per-read cost is an append and one
        ``endswith``: the framing is walked only when a read could have ended the body."""
        could_end = self.could_end(data)
        self.reads.append((t_ns, data))
        if could_end:
            self._walk()
        return self.whole

    def keep(self, t_ns: int, data: bytes) -> bool:
        """Keep one read that cannot end the body, and say so; False (nothing kept) for one that
        could: that read goes to ``add`` on its own turn (readstamps.StampingHandler)."""
        if self.could_end(data):
            return False
        self.reads.append((t_ns, data))
        return True

    def could_end(self, data: bytes) -> bool:
        """Whether the read ``data``, kept next, could end the body (the end's four bytes can
        come over several reads)."""
        if data.endswith(_TERMINATED):
            return True
        return len(data) < 4 and (b"".join(d for _, d in self.reads[-3:]) + data).endswith(_TERMINATED)

    def _walk(self) -> None:
        """Walk chunk framing from where the last walk stopped, over the reads since."""
        reads = self.reads
        blob = b"".join(d for _, d in reads[self.at :])
        pos = self.spans[-1][1] + 2 - self.base if self.spans else 0
        header = _HEADER.match
        while (m := header(blob, pos)) is not None:
            size, start = int(m[1], 16), m.end()
            if size == 0:  # trailers, if any, then an empty line
                self.whole = blob.find(_TERMINATED, start - 2) >= 0
                return
            if start + size + 2 > len(blob):  # the chunk's data is still coming
                self._advance(self.base + pos)
                return
            if blob[start + size : start + size + 2] != b"\r\n":
                self.whole, self.framed = True, False
                return
            self.spans.append((self.base + start, self.base + start + size))
            pos = start + size + 2
        if blob.find(b"\r\n", pos) >= 0:  # a whole line that is no chunk size
            self.whole, self.framed = True, False
            return
        self._advance(self.base + pos)

    def _advance(self, offset: int) -> None:
        """Resume the next walk at the read holding body offset ``offset``."""
        reads, at, base = self.reads, self.at, self.base
        while at + 1 < len(reads) and base + len(reads[at][1]) <= offset:
            base += len(reads[at][1])
            at += 1
        self.at, self.base = at, base

    def raw(self) -> bytes:
        return b"".join(d for _, d in self.reads)

    def take(self) -> Pieces:
        """The decoded body's bytes walked since the last call (the data of whole chunks), each
        read's share stamped with that read; reads that brought only framing give none. Walks
        first, so a caller can take as the body streams (off the read path) or once at its end."""
        if not self.whole:
            self._walk()
        reads, ends, spans = self.reads, self._ends, self.spans
        total = ends[-1] if ends else 0
        for _, data in reads[len(ends) :]:
            total += len(data)
            ends.append(total)
        out: Pieces = []
        r, parts = self._r, list[bytes]()
        for s, e in spans[self._k :]:
            while ends[r] <= s:
                if parts:
                    out.append((reads[r][0], _joined(parts)))
                    parts = []
                r += 1
            while True:
                start = ends[r] - len(reads[r][1])
                hi = min(e, ends[r])
                parts.append(reads[r][1][max(s, start) - start : hi - start])
                if hi == e:
                    break
                out.append((reads[r][0], _joined(parts)))
                parts, r = [], r + 1
        if parts:
            out.append((reads[r][0], _joined(parts)))
        self._r, self._k = r, len(spans)
        return out


def _joined(parts: list[bytes]) -> bytes:
    return parts[0] if len(parts) == 1 else b"".join(parts)


def chunked_sse(head: bytes) -> bool:
    """Whether a response head (status line and headers, CRLF-separated) is a 200 with a chunked,
    unencoded body: one this module can keep raw. Anything else (an error with a JSON body, a
    compressed or length-delimited one, an informational 1xx) goes through aiohttp as it is."""
    lines = head.split(b"\r\n")
    status = lines[0].split(b" ", 2)
    if len(status) < 2 or status[1] != b"200":
        return False
    fields: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        fields[name.strip().lower()] = value.strip().lower()
    coding = fields.get(b"content-encoding", b"identity")
    return (
        fields.get(b"transfer-encoding", b"").endswith(b"chunked")
        and coding in (b"", b"identity")
        and b"content-length" not in fields
        and b"text/event-stream" in fields.get(b"content-type", b"")
    )
