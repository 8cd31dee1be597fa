"""The PyTorch eager twin of the Chatbot's ``ChatTransformer`` (``tc.nn``'s ``Gpt``): token
and position embeddings, pre-norm blocks of causal self-attention and a GELU (tanh)
feed-forward four times the width, a final norm and the head tied to the token
embedding. Imported where torch is loaded: the tools suite's PyTorch subprocess and the gpt
suite's training-step process."""

from __future__ import annotations

from typing import Any


def gpt_twin(vocab: int, context: int, dim: int, heads: int, layers: int) -> Any:
    """A ``torch.nn.Module`` mapping ids ``[rows, context]`` to logits ``[rows, context,
    vocab]`` with the ``Gpt``'s architecture."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.c_fc, self.m_proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, n, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(dim, 2)
            q, k, v = (z.view(b, n, heads, dim // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(b, n, dim))
            return x + self.m_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GptTwin(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
            self.h = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(dim)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.wte(ids) + self.wpe.weight[:ids.shape[1]]
            for block in self.h:
                x = block(x)
            return self.ln_f(x) @ self.wte.weight.T

    return GptTwin()


__all__ = ["gpt_twin"]
