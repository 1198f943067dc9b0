"""Positions (paper section 3.5, plus rotary positions): which position each token has, and how it enters.

Contract:
    * `build_position_ids` gives the positions of the L newest tokens. With a 2-D (B, K) token mask (1 = token,
      0 = padding; for the target, K covers cached + new tokens) they are (B, L) and count real tokens only, so
      left padding does not shift them; without one they are (1, L) = cached length + [0, L). Either way
      source positions start at 0 and target positions are absolute (cached tokens count).
    * `sinusoidal_table` is (positions, d_model) in float32 (computed in float64). Layout "interleaved" is the
      paper's sin, cos, sin, cos, ...; "concatenated" is all sines, then all cosines (Marian); "tensor2tensor"
      is all sines, then all cosines, with tensor2tensor's frequencies (fairseq). Row p is position
      p + `position_offset`.
    * `SinusoidalPositionalEncoding` and `LearnedPositionalEmbedding` map (B or 1, L) positions to
      (B or 1, L, d_model) vectors added to the scaled token embedding; a learned table has `position_offset`
      leading rows that no position reads (fairseq's layout); `encodings()` of either is the (P, d_model)
      vectors of the positions 0 .. P-1.
    * `RotaryEmbedding` gives (B or 1, 1, L, D) cos and sin, which `apply_rotary` applies to queries and keys
      (B, H, L, D) with the "rotate_half" convention (the two halves of the head dimension are the pairs).
    * The sinusoidal table and the rotary `inv_freq` are non-persistent buffers: never saved nor loaded.
      `from_pretrained` creates them on the meta device, and the model's `_init_weights` rebuilds them with
      `build_table` / `build_inv_freq`.

Shapes: B batch, L tokens of this call, K cached + new tokens, P table positions, C d_model, H heads, D head dim.
"""

from __future__ import annotations

import torch
from torch import nn

from .configuration_vanilla_base import VanillaConfigBase


def sinusoidal_table(num_positions: int, dim: int, layout: str, offset: int = 0) -> torch.Tensor:
    """(num_positions, dim) table of the positions offset .. offset + num_positions - 1.

    `layout="interleaved"` is the paper's PE(pos, 2i) = sin(pos / 10000^(2i/dim)), PE(pos, 2i+1) = cos(...);
    `"concatenated"` stores the same values as all sines, then all cosines (Marian); `"tensor2tensor"` stores all
    sines, then all cosines, of pos * 10000^(-i / (dim/2 - 1)), i < dim/2 (tensor2tensor, fairseq). Computed in
    float64, returned in float32.
    """
    position = torch.arange(offset, offset + num_positions, dtype=torch.float64)[:, None]  # (P, 1)
    if layout == "tensor2tensor":
        inv_freq = torch.pow(10000.0, -torch.arange(dim // 2, dtype=torch.float64) / (dim // 2 - 1))  # (C/2,)
    else:
        inv_freq = torch.pow(10000.0, -torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (C/2,)
    angles = position * inv_freq  # (P, C/2)
    if layout == "interleaved":
        table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)  # (P, C): sin, cos, sin, ...
    else:
        table = torch.cat((angles.sin(), angles.cos()), dim=-1)  # (P, C): sin..., cos...
    return table.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoidal positions. The table is a non-persistent buffer: it is not saved, and
    `_init_weights` rebuilds it after `from_pretrained` (which creates buffers on the meta device)."""

    table: torch.Tensor

    def __init__(self, config: VanillaConfigBase):
        super().__init__()
        self.num_positions = config.max_position_embeddings
        self.dim = config.d_model
        self.layout = config.sinusoidal_layout
        self.offset = config.position_offset
        # in the dtype the model is built in (from_pretrained(dtype=...) sets it), not cast at every forward
        self.register_buffer("table", self.build_table().to(torch.get_default_dtype()), persistent=False)

    def build_table(self) -> torch.Tensor:
        return sinusoidal_table(self.num_positions, self.dim, self.layout, self.offset)

    def encodings(self) -> torch.Tensor:
        """(P, C) vectors of the positions 0 .. max_position_embeddings - 1."""
        return self.table

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        # position_ids: (B or 1, L) -> (B or 1, L, C)
        return self.table[position_ids]


class LearnedPositionalEmbedding(nn.Embedding):
    """A trained position table (paper Table 3, row E): position p is row p + `position_offset`."""

    def __init__(self, config: VanillaConfigBase):
        super().__init__(config.max_position_embeddings + config.position_offset, config.d_model)
        self.offset = config.position_offset

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        # position_ids: (B or 1, L) -> (B or 1, L, C)
        return super().forward(position_ids + self.offset if self.offset else position_ids)

    def encodings(self) -> torch.Tensor:
        """(P, C) vectors of the positions 0 .. max_position_embeddings - 1."""
        return self.weight[self.offset :]


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoFormer): rotates query/key pairs by position-dependent angles."""

    inv_freq: torch.Tensor

    def __init__(self, config: VanillaConfigBase, head_dim: int):
        super().__init__()
        self.head_dim = head_dim
        self.theta = config.rope_theta
        self.register_buffer("inv_freq", self.build_inv_freq(), persistent=False)

    def build_inv_freq(self) -> torch.Tensor:
        return 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim))

    def forward(self, position_ids: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        # position_ids: (B or 1, L) -> cos, sin: (B or 1, 1, L, D)
        angles = position_ids[..., None].float() * self.inv_freq  # (B, L, D/2)
        angles = torch.cat((angles, angles), dim=-1)[:, None]  # (B, 1, L, D)
        return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, H, L, D); rotate the two halves of the head dimension (the "rotate_half" convention)."""
    first, second = x.chunk(2, dim=-1)  # (B, H, L, D/2) each
    return x * cos + torch.cat((-second, first), dim=-1) * sin


def build_position_ids(
    token_mask: torch.Tensor | None, past_length: int | torch.Tensor, length: int, device: torch.device
) -> torch.Tensor:
    """Positions of the `length` newest tokens: (B, L) from a 2-D token mask (real tokens are counted, so left
    padding does not shift positions), else (1, L) = past_length + [0, L)."""
    if token_mask is not None and token_mask.dim() == 2:
        counted = token_mask.long().cumsum(-1) - 1  # (B, K)
        return counted[:, -length:].clamp(min=0)  # (B, L)
    return (torch.arange(length, device=device) + past_length)[None]  # (1, L)
