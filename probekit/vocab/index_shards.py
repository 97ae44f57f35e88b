"""Candidate vectors held in shards (typically ``np.load(..., mmap_mode="r")``), read block by block.

Global id = the shard's offset + the row within it. Blocks are prepared (float32, normalised for cosine) one at a
time, and the memory-mapped pages a block touched are handed back to the kernel after it (``MADV_DONTNEED``:
the file stays in the page cache, but no longer counts in this process's resident set), so a pass over
millions of rows holds about one block of vectors, not the shards.
"""

from __future__ import annotations

import mmap
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import ProbekitError
from ..index_rank import prepare

BLOCK_BYTES = 8 * 2**20
"""float32 bytes per prepared block (a multiple of 1,024 rows: faiss's own database block)."""
_PAGE = mmap.PAGESIZE


def _release(arr: np.ndarray) -> None:
    """Drop the resident pages of a memory-mapped (read-only) view; a no-op for arrays in memory."""
    mm = getattr(arr, "_mmap", None)
    base: Any = arr
    while mm is None and isinstance(getattr(base, "base", None), np.ndarray):
        base = base.base
        mm = getattr(base, "_mmap", None)
    if mm is None or not hasattr(mm, "madvise") or not arr.size:
        return
    try:
        start_addr = np.frombuffer(mm, dtype=np.uint8).ctypes.data
    except (TypeError, ValueError):  # a closed or odd mapping: nothing to release
        return
    lo = arr.ctypes.data - start_addr
    hi = lo + arr.nbytes
    lo -= lo % _PAGE
    hi = min(len(mm), -(-hi // _PAGE) * _PAGE)
    if 0 <= lo < hi:
        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


class Shards:
    """Row-concatenation of 2-D float16/float32 arrays (never copied whole)."""

    def __init__(self, shards: Sequence[np.ndarray], *, similarity: str):
        arrays = list(shards)
        if not arrays:
            raise ProbekitError("no vector shards given")
        dims = {a.shape[1] if a.ndim == 2 else -1 for a in arrays}
        if len(dims) != 1 or -1 in dims:
            raise ProbekitError(f"vector shards must be 2-D with one width; got shapes "
                                f"{', '.join(str(a.shape) for a in arrays[:4])}")
        for a in arrays:
            if a.dtype not in (np.float16, np.float32):
                raise ProbekitError(f"vector shards must be float16 or float32, got {a.dtype}")
        self.arrays, self.similarity = arrays, similarity
        self.dim = dims.pop()
        sizes = np.array([len(a) for a in arrays], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(sizes)])  # (n_shards + 1,)
        self.n = int(self.offsets[-1])
        self.block_rows = max(1024, (BLOCK_BYTES // (4 * max(self.dim, 1))) // 1024 * 1024)

    @property
    def nbytes(self) -> int:
        """Bytes of the vectors as stored (the shards' dtypes)."""
        return int(sum(a.nbytes for a in self.arrays))

    def signature(self) -> list[list]:
        """[rows, dim, dtype] per shard: what a saved index must match to be used with these shards."""
        return [[len(a), self.dim, str(a.dtype)] for a in self.arrays]

    def blocks(self, block_rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """(global id of the first row, prepared (rows, dim) float32 block), shard by shard."""
        step = block_rows or self.block_rows
        for off, a in zip(self.offsets[:-1].tolist(), self.arrays):
            for r0 in range(0, len(a), step):
                raw = a[r0:r0 + step]
                yield off + r0, prepare(raw, self.similarity)  # may be a view of raw (float32, not cosine)
                _release(raw)  # the consumer is done with the block

    def raw_blocks(self, step: int) -> Iterator[tuple[int, np.ndarray]]:
        """(global id of the first row, (rows, dim) float32 block as stored: not normalised), ``step`` rows at a
        time; float16 rows are converted by torch into one reused buffer, valid until the next block.

        Why its own loop: a query's pass is a few hundred steps, and per step a memory-map slice (numpy's memmap
        subclass), a conversion call and a release cost more than the step's arithmetic; here each shard is wrapped
        once (a plain array view, a torch view) and its mapped pages are released every :data:`BLOCK_BYTES`."""
        import torch

        buf = np.empty((step, self.dim), dtype=np.float32)
        tbuf = torch.from_numpy(buf)
        every = max(1, self.block_rows // step)
        for off, a in zip(self.offsets[:-1].tolist(), self.arrays):
            plain = a.view(np.ndarray) if isinstance(a, np.ndarray) else np.asarray(a)
            src = None
            if plain.dtype == np.float16:
                with warnings.catch_warnings():  # a read-only memory map: torch only reads it
                    warnings.simplefilter("ignore", UserWarning)
                    src = torch.from_numpy(plain if plain.flags.c_contiguous else np.ascontiguousarray(plain))
            start = 0
            for i, r0 in enumerate(range(0, len(a), step)):
                m = min(step, len(a) - r0)
                if src is not None:
                    tbuf[:m].copy_(src[r0:r0 + m])
                    yield off + r0, buf[:m]
                else:
                    yield off + r0, np.ascontiguousarray(plain[r0:r0 + m], dtype=np.float32)
                if (i + 1) % every == 0 or r0 + m >= len(a):
                    _release(a[start:r0 + m])
                    start = r0 + m

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """Prepared (len(ids), dim) float32 rows of global ``ids`` (any order, repeats allowed)."""
        ids = np.asarray(ids, dtype=np.int64).ravel()
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        if not len(ids):
            return out
        if ids.min() < 0 or ids.max() >= self.n:
            raise ProbekitError(f"candidate id out of range 0..{self.n - 1}")
        which = np.searchsorted(self.offsets, ids, side="right") - 1
        for s in np.unique(which).tolist():
            sel = np.flatnonzero(which == s)
            local = ids[sel] - self.offsets[s]
            out[sel] = prepare(self.arrays[s][local], self.similarity)
            _release(self.arrays[s])  # scattered rows touch most pages of a shard: hand them all back
        return out
