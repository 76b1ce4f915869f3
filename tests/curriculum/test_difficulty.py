"""Difficulty targeting across a domain's levels."""

from __future__ import annotations

import numpy as np
import pytest

from posttrain.curriculum import DifficultyConfig, DifficultyTargeter, group_levels
from posttrain.curriculum.difficulty import level_balanced_pass_rate

LEVELS = {"m/a/add": ["m/a/add@easy", "m/a/add@medium", "m/a/add@hard"]}


def test_group_levels_orders_easiest_first() -> None:
    ids = ["m/a/add@hard", "m/a/add@easy", "x/y/z", "m/a/add@medium"]
    assert group_levels(ids) == {"m/a/add": ["m/a/add@easy", "m/a/add@medium", "m/a/add@hard"],
                                 "x/y/z": ["x/y/z"]}


def test_step_hand_value() -> None:
    # Pass 0.9 vs target 0.5: move = 0.3 * tanh(5 * 0.4) = 0.3 * 0.96403 = 0.28921 from position 0.
    targeter = DifficultyTargeter(LEVELS)
    targeter.update("m/a/add", pass_rate=0.9, n=16)
    assert targeter.position["m/a/add"] == pytest.approx(0.3 * np.tanh(2.0))


def test_easy_domain_moves_to_the_hardest_level() -> None:
    targeter = DifficultyTargeter(LEVELS)
    for _ in range(20):
        targeter.update("m/a/add", pass_rate=1.0, n=16)
    probs = targeter.level_probs("m/a/add")
    assert max(probs, key=probs.__getitem__) == "m/a/add@hard"


def test_hard_domain_stays_easy_and_keeps_every_level() -> None:
    targeter = DifficultyTargeter(LEVELS, DifficultyConfig(start="middle"))
    for _ in range(20):
        targeter.update("m/a/add", pass_rate=0.0, n=16)
    probs = targeter.level_probs("m/a/add")
    assert probs["m/a/add@easy"] > 0.5 and min(probs.values()) > 0.0


def test_split_counts_sum() -> None:
    targeter = DifficultyTargeter(LEVELS)
    assert sum(targeter.split_counts("m/a/add", 13, np.random.default_rng(0)).values()) == 13


def test_state_round_trip() -> None:
    targeter = DifficultyTargeter(LEVELS)
    targeter.update("m/a/add", pass_rate=1.0, n=4)
    other = DifficultyTargeter(LEVELS)
    other.load_state_dict(targeter.state_dict())
    assert other.level_probs("m/a/add") == targeter.level_probs("m/a/add")


def test_level_balanced_pass_rate_ignores_empty_levels() -> None:
    # easy 8/8, medium 2/4, hard unseen -> (1.0 + 0.5) / 2.
    assert level_balanced_pass_rate([8, 2, 0], [8, 4, 0]) == pytest.approx(0.75)


def test_balanced_pass_rate_weights_levels_equally() -> None:
    # Mostly hard samples: easy 2/2, medium 3/4, hard 2/10 -> raw 7/16 = 0.4375 but balanced
    # (1.0 + 0.75 + 0.2) / 3 = 0.65.
    targeter = DifficultyTargeter(LEVELS)
    targeter.update("m/a/add", pass_rate=7 / 16, n=16, level_passes=[2, 3, 2], level_samples=[2, 4, 10])
    assert targeter.balanced_pass_rate("m/a/add") == pytest.approx(0.65)
