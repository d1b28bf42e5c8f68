"""Issue 44: where a GGUF's tensor data lies, read from the header, agrees with the ``gguf``
package's own reader, and a file too short for its tensor data is named as cut short."""

from __future__ import annotations

from pathlib import Path

import gguf
import gguf.quants
import numpy as np
import pytest

from specbench.theory.gguf_header import nbytes, read_gguf, tensor_data_problem


def _write(path: Path, alignment: int | None = None) -> Path:
    """Tensors of three ggml types (f32, f16, Q8_0 blocks) and, optionally, a custom alignment."""
    writer = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    rng = np.random.default_rng(0)
    writer.add_tensor("norm.weight", rng.standard_normal(96).astype(np.float32))
    writer.add_tensor("embd.weight", rng.standard_normal((7, 96)).astype(np.float16))
    q8 = gguf.GGMLQuantizationType.Q8_0
    writer.add_tensor("ffn.weight", gguf.quants.quantize(rng.standard_normal((5, 64)), q8), raw_dtype=q8)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("alignment", [None, 64])
def test_tensor_extents_agree_with_the_gguf_packages_reader(tmp_path: Path, alignment: int | None) -> None:
    path = _write(tmp_path / "m.gguf", alignment)
    ours, theirs = read_gguf(path), gguf.GGUFReader(path)
    assert ours.data_offset == theirs.data_offset
    # the reader's data_offset is where each tensor's bytes start; n_bytes its length
    expected = {t.name: (t.data_offset, t.n_bytes) for t in theirs.tensors}
    got = {t.name: (ours.data_offset + t.offset, nbytes(t)) for t in ours.tensors}
    assert got == expected
    assert tensor_data_problem(path) is None


def test_a_file_cut_inside_its_tensor_data_is_named_cut_short(tmp_path: Path) -> None:
    path = _write(tmp_path / "m.gguf")
    end = max(t.data_offset + t.n_bytes for t in gguf.GGUFReader(path).tensors)
    with path.open("r+b") as fh:
        fh.truncate(end)  # the alignment padding after the last tensor is not data
    assert tensor_data_problem(path) is None
    with path.open("r+b") as fh:
        fh.truncate(end - 1)  # one byte short of the last tensor's end
    assert tensor_data_problem(path) == (
        f"the file is cut short: its tensor data needs {end:,} bytes (to the end of tensor "
        f"'ffn.weight'), the file has {end - 1:,} (an interrupted download or copy?)"
    )


def test_a_file_cut_inside_its_header_is_named_cut_short(tmp_path: Path) -> None:
    path = _write(tmp_path / "m.gguf")
    with path.open("r+b") as fh:
        fh.truncate(read_gguf(path).data_offset - 40)  # inside the tensor entries
    problem = tensor_data_problem(path)
    assert problem is not None and problem.startswith("the file ends inside its GGUF header")


def test_a_file_without_tensors_needs_no_data(tmp_path: Path) -> None:
    """A vocabulary-only GGUF (llama.cpp ships them) may end before its aligned data section."""
    writer = gguf.GGUFWriter(str(tmp_path / "v.gguf"), "llama")
    writer.add_token_list(["a", "bb", "ccc"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    assert tensor_data_problem(tmp_path / "v.gguf") is None
