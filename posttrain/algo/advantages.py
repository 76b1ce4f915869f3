"""Group-relative advantages (GRPO, Dr. GRPO).

Each prompt is answered G times; a response's advantage is its reward minus the mean reward of its
group, optionally divided by the group's standard deviation (GRPO, Shao et al. 2024, eq. 3). Dr. GRPO
(Liu et al. 2025, sec. 3.1) drops the std division because it up-weights near-solved and near-failed
groups. Guarantees: pure functions of their inputs; a group whose rewards are all equal gets zero
advantages (never NaN), with or without std normalisation. Not here: which samples are kept
(dynamic sampling) or how advantages enter the loss (`posttrain.algo.losses`).
"""

from __future__ import annotations

import torch
from torch import Tensor


def group_advantages(rewards: Tensor, normalize_std: bool = True, eps: float = 1e-6) -> Tensor:
    """Advantages for equal-sized groups: `rewards` is `[B, G]` (B prompts, G samples each).

    The std is the unbiased sample std over the group (as in the GRPO reference implementations);
    a group of one sample has advantage 0.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [B, G], got shape {tuple(rewards.shape)}")
    rewards = rewards.float()
    num_samples = rewards.shape[1]
    centred = rewards - rewards.mean(dim=1, keepdim=True)  # [B, G]
    if not normalize_std or num_samples < 2:
        return centred if num_samples >= 2 else torch.zeros_like(rewards)
    std = rewards.std(dim=1, keepdim=True, correction=1)  # [B, 1]
    return centred / (std + eps)


def ragged_group_advantages(
    rewards: Tensor, group_ids: Tensor, normalize_std: bool = True, eps: float = 1e-6
) -> Tensor:
    """Advantages for groups of different sizes, e.g. after dynamic sampling dropped some samples.

    `rewards` is `[N]` and `group_ids` `[N]` (any integers; samples sharing an id form a group).
    Equals `group_advantages` on each group taken separately.
    """
    if rewards.shape != group_ids.shape or rewards.dim() != 1:
        raise ValueError("rewards and group_ids must both be [N]")
    rewards = rewards.float()
    _, index = torch.unique(group_ids, return_inverse=True)  # [N] dense group index
    num_groups = int(index.max().item()) + 1 if index.numel() else 0
    counts = torch.zeros(num_groups).index_add_(0, index, torch.ones_like(rewards))  # [num_groups]
    sums = torch.zeros(num_groups).index_add_(0, index, rewards)
    means = sums / counts
    centred = rewards - means[index]  # [N]
    is_singleton = counts[index] < 2
    if normalize_std:
        squares = torch.zeros(num_groups).index_add_(0, index, centred**2)
        std = torch.sqrt(squares / (counts - 1).clamp(min=1))  # unbiased, as in group_advantages
        centred = centred / (std[index] + eps)
    return torch.where(is_singleton, torch.zeros_like(centred), centred)
