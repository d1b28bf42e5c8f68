"""Read a model's architecture from its GGUF header, the file llama-server itself loads.

A GGUF file describes itself: ``general.architecture`` names the llama.cpp architecture and
``<arch>.*`` keys give its shape (format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).
Reading the header beats a ``config.json`` next to the file, which may belong to another
quantisation or model in the same folder. Key map::

    layers     <arch>.block_count              hidden     <arch>.embedding_length
    heads      <arch>.attention.head_count     kv_heads   <arch>.attention.head_count_kv
    head_dim   <arch>.attention.key_length     vocab      len(tokenizer.ggml.tokens)
    ffn        <arch>.feed_forward_length      experts    <arch>.expert_count (+ used, ffn, shared)
    sliding    <arch>.attention.sliding_window; which layers slide is fixed in llama.cpp per arch
    tied       no ``output.weight`` tensor (the LM head reuses ``token_embd.weight``)

Only the header is parsed (arrays are skipped, not decoded), so a 262k-token vocabulary costs
milliseconds; the ``gguf`` package's reader decodes everything and takes seconds (20 s for
llama.cpp's 16 MB Gemma 4 vocabulary file on a 2-core machine), and on a file cut inside its
tensor data fails with a numpy reshape error that does not say so. The tensor entries (shape,
ggml type, offset) are read too: :func:`tensor_data_problem` checks that their data fits the file,
sizing each ggml type with the ``gguf`` package's table.
"""

from __future__ import annotations

import functools
import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.errors import ConfigError
from specbench.theory.arch import Architecture, architecture_from_mapping

# Value types of the GGUF spec: fixed sizes (struct codes) for scalars; 8 string, 9 array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_KEEP_ARRAY = 256  # per-layer arrays are kept; longer ones (vocabularies) only counted
_MAX_DIMS = 4  # GGML_MAX_DIMS
_DEFAULT_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT: the data section's alignment without general.alignment
# Every n-th layer is global, the rest slide: llama.cpp sets this pattern in code, not the file
# (src/llama-model.cpp, hparams.set_swa_pattern).
SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2}


class _Cursor:
    def __init__(self, buf: mmap.mmap) -> None:
        self.buf = buf
        self.pos = 0

    def scalar(self, code: str) -> Any:
        (value,) = struct.unpack_from("<" + code, self.buf, self.pos)
        self.pos += struct.calcsize(code)
        return value

    def string(self) -> str:
        n = self.scalar("Q")
        text = self.buf[self.pos : self.pos + n].decode("utf-8", errors="replace")
        self.pos += n
        return text

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            return self.array()
        raise ValueError(f"unknown GGUF value type {vtype}")

    def array(self) -> Any:
        etype, n = self.scalar("I"), self.scalar("Q")
        if n <= _KEEP_ARRAY:
            return [self.value(etype) for _ in range(n)]
        if etype in _SCALARS:
            self.pos += n * struct.calcsize(_SCALARS[etype])
        elif etype == _STRING:
            self._skip_strings(n)
        else:
            for _ in range(n):
                self.value(etype)
        return _Count(n)

    def _skip_strings(self, n: int) -> None:
        """Step over ``n`` strings reading only their lengths (a vocabulary: 262k for Gemma 3)."""
        buf, pos, length = self.buf, self.pos, struct.Struct("<Q").unpack_from
        for _ in range(n):
            pos += 8 + length(buf, pos)[0]
        if pos > len(buf):  # a read past the end, as struct reports one: the file is cut short
            raise struct.error("string array runs past the end of the file")
        self.pos = pos


class _Count(int):
    """A long array, kept as its length."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's entry in the header: where its data lies relative to the data section."""

    name: str
    dims: tuple[int, ...]
    ggml_type: int
    offset: int


@dataclass(frozen=True)
class Header:
    """A GGUF header: metadata, tensor entries, and where the tensor data section starts."""

    meta: dict[str, Any]
    tensors: list[TensorInfo]
    data_offset: int
    file_size: int


class _CutShort(Exception):
    """The file ends inside its own header."""


class _NotGguf(ValueError):
    """The file does not start with the GGUF magic."""


def read_header(path: Path) -> tuple[dict[str, Any], list[str]]:
    """(metadata, tensor names) of a GGUF file; ConfigError naming the file if it is not one."""
    header = read_gguf(path)
    return header.meta, [t.name for t in header.tensors]


def read_gguf(path: Path) -> Header:
    """The header of a GGUF file; ConfigError naming the file if it is not one (or is cut short
    inside its header)."""
    try:
        return _read(path)
    except _CutShort:
        raise ConfigError(f"{path}: {_cut_header(path)}") from None
    except _NotGguf:
        raise ConfigError(f"{path}: not a GGUF file (no GGUF magic)") from None
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path}: cannot read the GGUF header ({err})") from None


def _read(path: Path) -> Header:
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != b"GGUF":
            raise _NotGguf
        try:
            return _parse(_Cursor(buf))
        except struct.error:  # a read past the end: only a cut file does that
            raise _CutShort from None


def _cut_header(path: Path) -> str:
    return (
        f"the file ends inside its GGUF header ({path.stat().st_size:,} bytes): it is cut short "
        "(an interrupted download or copy?)"
    )


def _parse(cur: _Cursor) -> Header:
    cur.pos = 4
    cur.scalar("I")  # version
    n_tensors, n_kv = cur.scalar("Q"), cur.scalar("Q")
    meta = {}
    for _ in range(n_kv):
        key = cur.string()
        meta[key] = cur.value(cur.scalar("I"))
    tensors = []
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.scalar("I")
        if n_dims > _MAX_DIMS:  # a damaged count would otherwise read the file as dims
            raise ValueError(f"tensor '{name}' has {n_dims} dimensions")
        dims = tuple(cur.scalar("Q") for _ in range(n_dims))
        tensors.append(TensorInfo(name, dims, cur.scalar("I"), cur.scalar("Q")))
    align = meta.get("general.alignment")
    align = align if isinstance(align, int) and align > 0 else _DEFAULT_ALIGNMENT
    start = -(-cur.pos // align) * align  # the data section starts at the next aligned offset
    return Header(meta, tensors, start, len(cur.buf))


def tensor_data_problem(path: Path) -> str | None:
    """Why the tensor data of GGUF ``path`` does not fit the file, or its header is cut short
    (None: it fits). llama.cpp checks the same at load time ("tensor data is
    not within the file bounds"), but only after a launch, and a plan would meanwhile estimate the
    run from the cut file's size. Sizes per ggml type come from the ``gguf`` package. A header
    this reader cannot parse for another reason (a newer GGUF version) is not judged here: the
    engine may know it."""
    try:
        header = _read(path)
    except _CutShort:
        return _cut_header(path)
    except (OSError, ValueError):
        return None
    end, last = header.data_offset, None
    for tensor in header.tensors:
        stop = header.data_offset + tensor.offset + nbytes(tensor)
        if stop > end:
            end, last = stop, tensor
    if last is None or end <= header.file_size:
        return None
    return (
        f"the file is cut short: its tensor data needs {end:,} bytes (to the end of tensor "
        f"'{last.name}'), the file has {header.file_size:,} (an interrupted download or copy?)"
    )


def nbytes(tensor: TensorInfo) -> int:
    """The tensor's data size; 0 for a ggml type this ``gguf`` package does not know (its start
    is still checked)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(tensor.ggml_type)]
    except (ValueError, KeyError):
        return 0
    return math.prod(tensor.dims) * size // block


def _int(value: Any) -> int:
    """Per-layer arrays (some archs vary heads or FFN by layer) count by their largest entry."""
    return int(max(value)) if isinstance(value, list) else int(value)


def architecture_from_gguf(path: str | Path) -> Architecture:
    """The Architecture a GGUF file's header describes (see the module docstring). Read once
    per file and process: a report asks for it several times (issue 31); a file replaced since
    (another size or mtime) is read again."""
    p = Path(path)
    try:
        stat = p.stat()
    except OSError as err:
        raise ConfigError(f"{p}: cannot read the GGUF header ({err})") from None
    return _cached_architecture(str(p.resolve()), stat.st_size, stat.st_mtime_ns, str(path))


@functools.lru_cache(maxsize=16)
def _cached_architecture(resolved: str, size: int, mtime_ns: int, given: str) -> Architecture:
    del resolved, size, mtime_ns  # the cache key: the file's identity, not its name alone
    return _architecture_from_file(Path(given))


def _architecture_from_file(p: Path) -> Architecture:
    meta, tensors = read_header(p)
    arch = str(meta.get("general.architecture", ""))

    def get(name: str, default: int | None = None) -> int:
        value = meta.get(f"{arch}.{name}")
        if value is None:
            if default is None:
                raise ConfigError(f"{p}: GGUF header lacks {arch}.{name}")
            return default
        return _int(value)

    layers, hidden, heads = get("block_count"), get("embedding_length"), get("attention.head_count")
    tokens = meta.get("tokenizer.ggml.tokens")
    fields: dict[str, Any] = {
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "kv_heads": get("attention.head_count_kv", heads),
        "head_dim": get("attention.key_length", hidden // max(heads, 1)),
        "vocab": len(tokens) if isinstance(tokens, list) else int(tokens or get("vocab_size")),
        "tied_embeddings": "output.weight" not in tensors,
        "mtp_layers": get("nextn_predict_layers", 0),
        "source": f"GGUF header ({arch})",
        **_moe(get),
    }
    window, pattern = get("attention.sliding_window", 0), SWA_PATTERN.get(arch)
    if window and pattern:
        fields.update(sliding_layers=layers - layers // pattern, sliding_window=window)
    name = str(meta.get("general.name") or p.stem)
    return architecture_from_mapping(name, fields)


def _moe(get: Any) -> dict[str, Any]:
    ffn = get("feed_forward_length", 0)
    experts = get("expert_count", 0)
    if experts == 0:
        return {"ffn": ffn}
    shared = get("expert_shared_count", 0)
    dense_layers = get("leading_dense_block_count", 0)
    expert_ffn = get("expert_feed_forward_length", ffn)
    return {
        "experts": experts,
        "top_k": get("expert_used_count"),
        "expert_ffn": expert_ffn,
        "shared_experts": shared,
        "shared_expert_ffn": get("expert_shared_feed_forward_length", expert_ffn) if shared else 0,
        "dense_layers": dense_layers,
        "ffn": ffn if dense_layers else 0,
    }
