"""Per-domain sample weights."""

from __future__ import annotations

import pytest
import torch

from posttrain.algo import LossConfig, domain_sample_weights, policy_loss, weights_from_coefficients


def test_equal_coefficients_balance_unequal_domains() -> None:
    # B = 3, coefficients 0.5 each: a -> 3 * 0.5 / 2 = 0.75, b -> 3 * 0.5 / 1 = 1.5
    # so (1/3) * sum w_i l_i = 0.25 l_a1 + 0.25 l_a2 + 0.5 l_b = 0.5 mean_a + 0.5 mean_b
    weights = domain_sample_weights(["a", "a", "b"])
    torch.testing.assert_close(weights, torch.tensor([0.75, 0.75, 1.5]))


def test_given_coefficients() -> None:
    # B = 4: a -> 4 * 0.2 / 2 = 0.4, b -> 4 * 0.8 / 2 = 1.6
    weights = domain_sample_weights(["a", "b", "a", "b"], {"a": 0.2, "b": 0.8, "c": 1.0})
    torch.testing.assert_close(weights, torch.tensor([0.4, 1.6, 0.4, 1.6]))


def test_missing_coefficient_is_named() -> None:
    with pytest.raises(KeyError, match="'b'"):
        domain_sample_weights(["a", "b"], {"a": 1.0})


@pytest.mark.parametrize(
    ("aggregation", "expected"),
    [
        # coefficients [0.1, 0.2], lengths [2, 3]
        ("token_mean", [0.5, 1.0]),  # times total tokens 5
        ("seq_mean_token_mean", [0.4, 1.2]),  # times B * T_i: 2 * 2 * 0.1, 2 * 3 * 0.2
        ("seq_mean_token_sum_norm", [0.6, 1.2]),  # times B * longest: 2 * 3
    ],
)
def test_weights_from_coefficients_by_hand(aggregation: str, expected: list[float]) -> None:
    got = weights_from_coefficients([0.1, 0.2], [2, 3], aggregation)  # type: ignore[arg-type]
    assert got == pytest.approx(expected)


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_converted_weights_give_the_coefficient_loss(aggregation: str) -> None:
    # ratio 1 makes every token's loss -A_i, so sum_i c_i * sum_t l_it = -(0.1 * 2 * 1 + 0.2 * 3 * 2) = -1.4
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    weights = weights_from_coefficients([0.1, 0.2], [2, 3], aggregation)  # type: ignore[arg-type]
    logprobs = torch.zeros(2, 3)
    out = policy_loss(
        logprobs, logprobs, torch.tensor([1.0, 2.0]), mask, LossConfig(aggregation=aggregation),  # type: ignore[arg-type]
        sample_weights=torch.tensor(weights),
    )  # fmt: skip
    torch.testing.assert_close(out.loss, torch.tensor(-1.4))
