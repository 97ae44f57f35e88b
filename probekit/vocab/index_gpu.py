"""Gold counts on a torch device (a GPU when present): :class:`~probekit.index_rank.GoldCounter`'s rule, its matrix
products and comparisons in torch.

Same rule as the numpy counter (a candidate counts against a gold when its score is more than the tie tolerance
above the gold's own score; the gold's twins never count); only the kernel differs, so a candidate within float32
noise of the threshold may count differently, which the tolerance exists to absorb. float32 throughout (TF32 is
never asked for: torch's default matmul precision keeps full float32).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..index_rank import GoldCounter, RowsOf

GPU_CHUNK = 65536
"""Candidates per matrix product on the device (the comparison holds n_queries x golds x GPU_CHUNK booleans)."""


def default_device() -> str:
    """``cuda`` when torch sees a GPU, else ``cpu`` (where the numpy counter is used)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class TorchGoldCounter(GoldCounter):
    """:class:`GoldCounter` whose :meth:`add` runs in torch on ``device``."""

    def __init__(self, q: np.ndarray, golds: Sequence[Sequence[int | None]], exclude: Sequence[Sequence[int]], *,
                 similarity: str, max_norm: float, rows_of: RowsOf, twins: Mapping[int, list[int]], device: str):
        super().__init__(q, golds, exclude, similarity=similarity, max_norm=max_norm, rows_of=rows_of, twins=twins)
        import torch

        self.torch, self.device = torch, torch.device(device)
        if self.idle:
            return
        self.tq = torch.from_numpy(np.ascontiguousarray(self.q)).to(self.device)  # (n_rows, dim)
        self.tthr = torch.from_numpy(self.thr).to(self.device)  # (n_rows, width); inf where no gold
        self.tcounts = torch.zeros(self.thr.shape, dtype=torch.int64, device=self.device)
        self.town = [torch.from_numpy(a).to(self.device) for a in (self.own_r, self.own_s, self.own_id)]

    def add(self, c0: int, x: np.ndarray, sq: np.ndarray, *, chunk: int) -> None:
        if self.idle:
            return
        torch = self.torch
        xt = torch.from_numpy(np.ascontiguousarray(x)).to(self.device)  # (n_block, dim)
        sqt = torch.from_numpy(np.ascontiguousarray(sq)).to(self.device)  # (n_block,)
        own_r, own_s, own_id = self.town
        step = max(chunk, GPU_CHUNK)
        with torch.inference_mode():
            for s0 in range(0, len(x), step):
                part = self.tq @ xt[s0:s0 + step].T  # (n_rows, chunk)
                if self.similarity == "l2":
                    part = 2 * part - sqt[s0:s0 + step][None, :]
                # (n_rows, width, chunk) -> (n_rows, width): candidates above each gold's threshold
                self.tcounts += (part[:, None, :] > self.tthr[:, :, None]).sum(-1)
                lo = c0 + s0
                inside = (own_id >= lo) & (own_id < lo + part.shape[1])
                r_, s_, i_ = own_r[inside], own_s[inside], own_id[inside]
                beat = (part[r_, i_ - lo] > self.tthr[r_, s_]).to(torch.int64)
                self.tcounts.index_put_((r_, s_), -beat, accumulate=True)

    def ranks(self) -> list[list[int | None]]:
        if not self.idle:
            self.counts = self.tcounts.cpu().numpy()
        return super().ranks()
