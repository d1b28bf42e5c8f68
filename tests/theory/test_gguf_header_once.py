"""Issue 31: a model's GGUF header is read once per file, not on every call of a report."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from specbench.theory import gguf_header


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def write_gguf(path: Path, layers: int, vocab: int) -> None:
    """A header-only GGUF: a llama shape and a ``vocab``-entry token array (no tensors)."""
    kv = [
        (_string("general.architecture"), struct.pack("<I", 8) + _string("llama")),
        (_string("llama.block_count"), struct.pack("<II", 4, layers)),
        (_string("llama.embedding_length"), struct.pack("<II", 4, 256)),
        (_string("llama.attention.head_count"), struct.pack("<II", 4, 4)),
        (_string("llama.feed_forward_length"), struct.pack("<II", 4, 512)),
        (
            _string("tokenizer.ggml.tokens"),
            struct.pack("<IIQ", 9, 8, vocab) + b"".join(_string(f"t{i}") for i in range(vocab)),
        ),
    ]
    body = b"".join(k + v for k, v in kv)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + body)


def test_the_header_is_read_once_per_file_and_again_when_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m.gguf"
    write_gguf(model, layers=4, vocab=1000)
    reads: list[Path] = []
    real = gguf_header.read_header

    def counted(path: Path) -> object:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(gguf_header, "read_header", counted)
    first = gguf_header.architecture_from_gguf(model)
    again = gguf_header.architecture_from_gguf(str(model))
    assert (first.layers, first.vocab) == (4, 1000) and again == first
    assert len(reads) == 1
    write_gguf(model, layers=6, vocab=1000)  # replaced: another size, another mtime
    os.utime(model, ns=(1, 1))
    assert gguf_header.architecture_from_gguf(model).layers == 6
    assert len(reads) == 2
