"""Per-domain sample weights."""

from __future__ import annotations

import pytest
import torch

from posttrain.algo import domain_sample_weights


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
