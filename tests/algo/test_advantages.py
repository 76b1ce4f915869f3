"""Group advantages against values worked out by hand."""

from __future__ import annotations

import pytest
import torch

from posttrain.algo import group_advantages, ragged_group_advantages


def test_grpo_divides_by_unbiased_group_std() -> None:
    # mean 0.5 -> centred [.5, -.5, .5, -.5]; unbiased var = 4 * 0.25 / 3 = 1/3, std = 0.57735
    # advantage = 0.5 / 0.57735 = 0.866025
    adv = group_advantages(torch.tensor([[1.0, 0.0, 1.0, 0.0]]), eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([[0.866025, -0.866025, 0.866025, -0.866025]]))


def test_dr_grpo_only_centres() -> None:
    # group 1: mean 2 -> [-1, 0, 1]; group 2: mean 0.5 -> [0.5, -0.5, 0]... rewards [1, 0, 0.5]
    adv = group_advantages(torch.tensor([[1.0, 2.0, 3.0], [1.0, 0.0, 0.5]]), normalize_std=False)
    torch.testing.assert_close(adv, torch.tensor([[-1.0, 0.0, 1.0], [0.5, -0.5, 0.0]]))


def test_equal_rewards_give_zero_not_nan() -> None:
    # centred is 0 and std is 0: 0 / (0 + eps) = 0
    adv = group_advantages(torch.tensor([[1.0, 1.0, 1.0]]))
    assert torch.equal(adv, torch.zeros(1, 3))


def test_single_sample_groups_get_zero() -> None:
    adv = group_advantages(torch.tensor([[3.0], [5.0]]))
    assert torch.equal(adv, torch.zeros(2, 1))


def test_rejects_flat_rewards() -> None:
    with pytest.raises(ValueError, match=r"\[B, G\]"):
        group_advantages(torch.tensor([1.0, 0.0]))


def test_ragged_groups_by_hand() -> None:
    # group 7: rewards [1, 0, 0], mean 1/3 -> centred [2/3, -1/3, -1/3];
    #   unbiased var = (4/9 + 1/9 + 1/9) / 2 = 1/3, std = 0.57735 -> [1.154701, -0.577350, -0.577350]
    # group 3: rewards [2, 4], mean 3 -> [-1, 1]; var = 2 / 1, std = 1.414214 -> [-0.707107, 0.707107]
    # group 9: a single sample -> 0
    rewards = torch.tensor([1.0, 0.0, 2.0, 0.0, 4.0, 5.0])
    groups = torch.tensor([7, 7, 3, 7, 3, 9])
    adv = ragged_group_advantages(rewards, groups, eps=0.0)
    expected = torch.tensor([1.154701, -0.577350, -0.707107, -0.577350, 0.707107, 0.0])
    torch.testing.assert_close(adv, expected)


def test_ragged_matches_equal_groups() -> None:
    rewards = torch.rand(3, 5, generator=torch.Generator().manual_seed(0))
    groups = torch.arange(3).repeat_interleave(5)
    for normalize in (True, False):
        flat = ragged_group_advantages(rewards.flatten(), groups, normalize_std=normalize)
        torch.testing.assert_close(flat.view(3, 5), group_advantages(rewards, normalize_std=normalize))
