"""Per-sample weights from loss coefficients."""

from __future__ import annotations

import pytest
import torch

from posttrain.algo import LossConfig, policy_loss, weights_from_coefficients


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
