"""The PyTorch eager twin of ``tensorcode.tools.scorer.PairScorer``, the peer of the tools
and Investigator suites (imported inside their subprocesses, where torch is loaded)."""

from __future__ import annotations

from typing import Any


def pair_scorer(dim: int, hidden: int, buckets: int, query_size: int | None = None) -> Any:
    """A ``torch.nn.Module`` with the PairScorer's architecture: mean-pooled hashed
    embeddings of the query and of each item, one tanh layer over their sum and product,
    a score per item, and padded items pushed to -1e9. With ``query_size`` the query is a
    numeric vector of that size (a Scene's observation), as in ``PairScorer``."""
    import torch

    width = dim if query_size is None else query_size

    class PairScorerTwin(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = torch.nn.Embedding(buckets, dim)
            self.query = torch.nn.Linear(width, hidden)
            self.item = torch.nn.Linear(dim, hidden, bias=False)
            self.pair = torch.nn.Linear(width, dim, bias=False)
            self.mix = torch.nn.Linear(dim, hidden, bias=False)
            self.out = torch.nn.Linear(hidden, 1)

        def pool(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            rows = self.embedding(ids) * mask.unsqueeze(-1)
            return rows.sum(-2) / mask.sum(-1, keepdim=True).clamp(min=1.0)

        def forward(self, *inputs):  # type: ignore[no-untyped-def]
            if query_size is None:
                q_ids, q_mask, h_ids, h_mask, valid = inputs
                q = self.pool(q_ids, q_mask)
            else:
                q, h_ids, h_mask, valid = inputs
            h = self.pool(h_ids, h_mask)
            hidden_ = torch.tanh(self.query(q).unsqueeze(-2) + self.item(h)
                                 + self.mix(self.pair(q).unsqueeze(-2) * h))
            return self.out(hidden_).squeeze(-1) + (valid - 1.0) * 1e9

    return PairScorerTwin()
