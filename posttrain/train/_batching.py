"""Right-padded model inputs for (prompt, response) pairs and the index of each response token.

Sample b is laid out as `prompt_b + response_b` followed by padding (token 0, masked out), so padding
never precedes a real token and causal attention keeps real positions exactly as unpadded. Response
token j of sample b sits at position `P_b + j` and is predicted by the logits at `P_b + j - 1`.
Only positions from the shortest prompt's last token onwards are needed, which the model can be told
through `logits_to_keep`. Guarantees: pure, CPU tensors. Not here: running the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class PaddedPairs:
    """A micro-batch of (prompt, response) pairs ready for a causal LM."""

    input_ids: Tensor
    """`[B, L]` prompt + response tokens, right-padded with 0."""
    attention_mask: Tensor
    """`[B, L]` 1 on real tokens."""
    first_kept: int
    """First position whose logits are needed (the shortest prompt's last token)."""
    response_index: Tensor
    """`[B, R]` column in the kept logits `[B, L - first_kept, V]` that predicts each response token."""
    response_mask: Tensor
    """`[B, R]` 1 on real response tokens."""

    @property
    def num_kept(self) -> int:
        return self.input_ids.shape[1] - self.first_kept

    def kept_targets(self) -> Tensor:
        """`[B, L - first_kept]` the token each kept position predicts (0 past the end)."""
        targets = torch.zeros(self.input_ids.shape[0], self.num_kept, dtype=self.input_ids.dtype)
        targets[:, :-1] = self.input_ids[:, self.first_kept + 1 :]
        return targets


def pad_pairs(prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]]) -> PaddedPairs:
    """Lay out the pairs as described in the module docstring; every prompt must be non-empty."""
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("every prompt needs at least one token")
    prompt_lens = [len(p) for p in prompt_ids]
    response_lens = [len(r) for r in response_ids]
    num_rows = len(prompt_ids)
    total_len = max(p + r for p, r in zip(prompt_lens, response_lens, strict=True))
    max_response = max(max(response_lens), 1)
    input_ids = torch.zeros(num_rows, total_len, dtype=torch.long)
    attention_mask = torch.zeros(num_rows, total_len, dtype=torch.long)
    for row, (prompt, response) in enumerate(zip(prompt_ids, response_ids, strict=True)):
        tokens = list(prompt) + list(response)
        input_ids[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        attention_mask[row, : len(tokens)] = 1
    first_kept = min(prompt_lens) - 1
    offsets = torch.arange(max_response)  # [R]
    starts = torch.tensor(prompt_lens) - 1 - first_kept  # [B]
    response_index = (starts.unsqueeze(1) + offsets).clamp(max=total_len - first_kept - 1)  # [B, R]
    response_mask = (offsets < torch.tensor(response_lens).unsqueeze(1)).float()  # [B, R]
    return PaddedPairs(input_ids, attention_mask, first_kept, response_index, response_mask)


def pad_floats(rows: Sequence[Sequence[float]], width: int) -> Tensor:
    """`[B, width]` float32, each row right-padded with 0."""
    out = torch.zeros(len(rows), width, dtype=torch.float32)
    for i, row in enumerate(rows):
        if row:
            out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out


def unpad(values: Tensor, lengths: Sequence[int]) -> list[list[float]]:
    """Rows of `[B, R]` cut back to their lengths, as Python floats."""
    rows = values.detach().float().cpu().tolist()
    return [row[:n] for row, n in zip(rows, lengths, strict=True)]


def chunks(num_items: int, size: int) -> list[slice]:
    """Consecutive slices of at most `size` covering `range(num_items)`."""
    return [slice(start, min(start + size, num_items)) for start in range(0, num_items, size)]
