"""The clipped policy loss, its aggregation modes and penalty terms against hand-worked values."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from posttrain.algo import LossConfig, Normalizer, policy_loss

# Two responses: the first has 2 real tokens, the second 1; the third column is padding.
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def _equal_policy_loss(config: LossConfig, advantages: list[float]) -> torch.Tensor:
    logprobs = torch.full((2, 3), -1.0)
    return policy_loss(logprobs, logprobs, torch.tensor(advantages), MASK, config).loss


@pytest.mark.parametrize(
    ("aggregation", "norm_num_tokens", "expected"),
    [
        # ratio 1, A = [1, 2] -> token losses [-1, -1 | -2]
        ("token_mean", None, -4.0 / 3.0),  # (-1 - 1 - 2) / 3 tokens
        ("seq_mean_token_mean", None, -1.5),  # (mean[-1, -1] + mean[-2]) / 2
        ("seq_mean_token_sum_norm", None, -1.0),  # (-2 + -2) / (longest 2 * 2 responses)
        ("seq_mean_token_sum_norm", 4, -0.5),  # (-2 + -2) / (4 * 2)
    ],
)
def test_aggregation_modes(aggregation: str, norm_num_tokens: int | None, expected: float) -> None:
    config = LossConfig(aggregation=aggregation, norm_num_tokens=norm_num_tokens)  # type: ignore[arg-type]
    torch.testing.assert_close(_equal_policy_loss(config, [1.0, 2.0]), torch.tensor(expected))


@pytest.mark.parametrize(
    ("ratio", "advantage", "expected_loss", "expected_clipped"),
    [
        (1.5, 1.0, -1.28, 1.0),  # above 1 + clip_high = 1.28: the clipped branch -1.28 * 1 wins
        (1.1, 1.0, -1.1, 0.0),  # inside the range: -1.1 * 1
        (0.5, 1.0, -0.5, 0.0),  # A > 0 never clips below: max(-0.5, -0.8) = -0.5
        (0.5, -1.0, 0.8, 1.0),  # below 1 - clip_low = 0.8 with A < 0: max(0.5, 0.8) = 0.8
        (1.5, -1.0, 1.5, 0.0),  # A < 0 never clips above: max(1.5, 1.28) = 1.5
    ],
)
def test_asymmetric_clipping(
    ratio: float, advantage: float, expected_loss: float, expected_clipped: float
) -> None:
    old = torch.tensor([[-1.0]])
    out = policy_loss(old + math.log(ratio), old, torch.tensor([advantage]), torch.ones(1, 1), LossConfig())
    torch.testing.assert_close(out.loss, torch.tensor(expected_loss))
    torch.testing.assert_close(out.clip_fraction, torch.tensor(expected_clipped))


def test_clipped_tokens_get_no_gradient() -> None:
    # token 0: ratio 1.5 > 1.28 with A = 1 -> clipped, d/dlogp = 0
    # token 1: ratio 1.1, loss -exp(logp - old) * A -> d/dlogp = -1.1 * 1 / 2 tokens = -0.55
    old = torch.tensor([[-1.0, -2.0]])
    logprobs = (old + torch.log(torch.tensor([[1.5, 1.1]]))).requires_grad_()
    policy_loss(logprobs, old, torch.tensor([1.0]), torch.ones(1, 2), LossConfig()).loss.backward()
    assert logprobs.grad is not None
    torch.testing.assert_close(logprobs.grad, torch.tensor([[0.0, -0.55]]))


def test_gspo_sequence_ratio_and_gradient() -> None:
    # log ratios [0.2, -0.1 | pad] -> sequence log ratio (0.2 - 0.1) / 2 = 0.05, r = e^0.05 = 1.051271
    # inside [0.8, 1.28] with A = 1: loss = -1.051271 on both tokens; seq mean -> -1.051271
    # d/dlogp_t of -exp(mean_t log ratio) = -r / 2 = -0.525636 on each real token, 0 on padding
    old = torch.tensor([[-1.0, -1.0, 5.0]])
    logprobs = torch.tensor([[-0.8, -1.1, 100.0]], requires_grad=True)
    config = LossConfig(ratio="sequence", aggregation="seq_mean_token_mean")
    out = policy_loss(logprobs, old, torch.tensor([1.0]), torch.tensor([[1.0, 1.0, 0.0]]), config)
    out.loss.backward()
    torch.testing.assert_close(out.loss, torch.tensor(-1.051271))
    assert logprobs.grad is not None
    torch.testing.assert_close(logprobs.grad, torch.tensor([[-0.525636, -0.525636, 0.0]]))


def test_sample_weights_scale_each_response() -> None:
    # one token each, ratio 1, A = [1, 2], weights [3, 0.5]: (-1 * 3 + -2 * 0.5) / 2 tokens = -2
    logprobs = torch.zeros(2, 1)
    out = policy_loss(
        logprobs, logprobs, torch.tensor([1.0, 2.0]), torch.ones(2, 1), LossConfig(),
        sample_weights=torch.tensor([3.0, 0.5]),
    )  # fmt: skip
    torch.testing.assert_close(out.loss, torch.tensor(-2.0))


def test_kl_penalty_enters_loss() -> None:
    # A = 0 so only the penalty remains: k3 at pi = 0.5, ref = 0.25 is 0.193147; beta 0.1 -> 0.0193147
    logprobs = torch.tensor([[math.log(0.5)]])
    config = LossConfig(kl_beta=0.1)
    out = policy_loss(
        logprobs, logprobs, torch.zeros(1), torch.ones(1, 1), config,
        ref_logprobs=torch.tensor([[math.log(0.25)]]),
    )  # fmt: skip
    torch.testing.assert_close(out.loss, torch.tensor(0.0193147))
    torch.testing.assert_close(out.kl, torch.tensor(0.193147))


def test_kl_penalty_is_bounded_per_token() -> None:
    # log ref - log pi = 30: k3 = e^30 - 31 ~ 1e13, clamped to 10; beta 0.5 -> loss 5, gradient 0
    logprobs = torch.tensor([[-31.0]], requires_grad=True)
    out = policy_loss(
        logprobs, logprobs.detach(), torch.zeros(1), torch.ones(1, 1), LossConfig(kl_beta=0.5),
        ref_logprobs=torch.tensor([[-1.0]]),
    )  # fmt: skip
    out.loss.backward()
    torch.testing.assert_close(out.loss, torch.tensor(5.0))
    assert logprobs.grad is not None and logprobs.grad.abs().max() == 0


def test_entropy_bonus_lowers_loss() -> None:
    # A = 0, entropy log 2 = 0.693147, coefficient 0.5 -> loss = -0.346574
    logprobs = torch.zeros(1, 1)
    out = policy_loss(
        logprobs, logprobs, torch.zeros(1), torch.ones(1, 1), LossConfig(entropy_coef=0.5),
        entropy=torch.tensor([[math.log(2.0)]]),
    )  # fmt: skip
    torch.testing.assert_close(out.loss, torch.tensor(-0.346574))


def test_kl_beta_without_reference_is_an_error() -> None:
    logprobs = torch.zeros(1, 1)
    with pytest.raises(ValueError, match="ref_logprobs"):
        policy_loss(logprobs, logprobs, torch.zeros(1), torch.ones(1, 1), LossConfig(kl_beta=0.1))


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_micro_batches_sum_to_the_whole_batch(aggregation: str) -> None:
    gen = torch.Generator().manual_seed(0)
    logprobs, old = -torch.rand(4, 5, generator=gen), -torch.rand(4, 5, generator=gen)
    advantages = torch.randn(4, generator=gen)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]).float()
    config = LossConfig(aggregation=aggregation)  # type: ignore[arg-type]
    whole = policy_loss(logprobs, old, advantages, mask, config).loss
    norm = Normalizer.from_mask(mask)
    parts = [policy_loss(logprobs[s], old[s], advantages[s], mask[s], config, normalizer=norm).loss
             for s in (slice(0, 1), slice(1, 4))]  # fmt: skip
    torch.testing.assert_close(sum(parts), whole)


def test_garbage_under_the_mask_stays_out() -> None:
    logprobs = torch.tensor([[-1.0, float("nan")]])
    old = torch.tensor([[-1.0, float("-inf")]])
    out = policy_loss(logprobs, old, torch.tensor([2.0]), torch.tensor([[1.0, 0.0]]), LossConfig())
    torch.testing.assert_close(out.loss, torch.tensor(-2.0))


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValidationError):
        LossConfig(clip_low=1.5)
    with pytest.raises(ValidationError):
        LossConfig(aggregation="sum")  # type: ignore[arg-type]
