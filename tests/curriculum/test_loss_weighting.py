"""Loss coefficients against hand-computed values, and the double-weighting guard."""

from __future__ import annotations

import pytest

from posttrain.curriculum import DoubleWeightingError, WeightRouting, domain_loss_coefficients

# Batch: two code samples of 300 and 100 tokens, one math sample of 100 tokens (500 tokens in all).
IDS = ["code", "code", "math"]
TOKENS = [300, 100, 100]


def _domain_share(coefs: list[float], domain: str) -> float:
    # With a per-token loss of 1 everywhere, sum_i coef_i * tokens_i is each domain's share of the loss.
    return sum(c * t for c, t, d in zip(coefs, TOKENS, IDS, strict=True) if d == domain)


def test_token_mean_gives_code_its_token_share() -> None:
    # 1/500 per token: code 400/500 = 0.8 of the gradient.
    coefs = domain_loss_coefficients(IDS, TOKENS, mode="token_mean")
    assert coefs == pytest.approx([1 / 500] * 3)
    assert _domain_share(coefs, "code") == pytest.approx(0.8)


def test_sequence_mean_coefficients() -> None:
    # 1 / (3 samples x own length): [1/900, 1/300, 1/300].
    assert domain_loss_coefficients(IDS, TOKENS, mode="sequence_mean") == pytest.approx(
        [1 / 900, 1 / 300, 1 / 300])


def test_domain_token_mean_gives_each_domain_its_weight() -> None:
    # Weights 0.25 code / 0.75 math: code tokens 400 -> 0.25/400 each; math 100 -> 0.75/100.
    coefs = domain_loss_coefficients(IDS, TOKENS, {"code": 0.25, "math": 0.75})
    assert coefs == pytest.approx([0.25 / 400, 0.25 / 400, 0.75 / 100])
    assert _domain_share(coefs, "math") == pytest.approx(0.75)


def test_domain_sequence_mean_coefficients() -> None:
    # code: 0.5 / (2 samples x length) -> [0.5/600, 0.5/200]; math: 0.5 / (1 x 100).
    coefs = domain_loss_coefficients(IDS, TOKENS, {"code": 1.0, "math": 1.0}, mode="domain_sequence_mean")
    assert coefs == pytest.approx([0.5 / 600, 0.5 / 200, 0.5 / 100])


def test_weights_are_renormalised_over_present_domains() -> None:
    # "other" is absent from the batch; code and math split 1 in ratio 0.1 : 0.3 -> 0.25 / 0.75.
    coefs = domain_loss_coefficients(IDS, TOKENS, {"code": 0.1, "math": 0.3, "other": 0.6})
    assert _domain_share(coefs, "code") == pytest.approx(0.25)


def test_no_weights_means_batch_sample_shares() -> None:
    # code has 2 of 3 samples -> share 2/3 regardless of its 400 tokens.
    coefs = domain_loss_coefficients(IDS, TOKENS)
    assert _domain_share(coefs, "code") == pytest.approx(2 / 3)


def test_double_weighting_is_refused() -> None:
    with pytest.raises(DoubleWeightingError):
        domain_loss_coefficients(IDS, TOKENS, {"code": 0.5, "math": 0.5}, sampled_by_weight=True)


def test_double_weighting_allowed_when_explicit() -> None:
    coefs = domain_loss_coefficients(IDS, TOKENS, {"code": 0.5, "math": 0.5}, sampled_by_weight=True,
                                     allow_double=True)
    assert _domain_share(coefs, "code") == pytest.approx(0.5)


def test_routing_sends_weights_to_one_side_only() -> None:
    weights = {"code": 0.2, "math": 0.8}
    via_loss = WeightRouting("loss")
    assert via_loss.sampling_weights(weights) == {"code": 0.5, "math": 0.5}
    assert via_loss.loss_weights(weights) == weights
    assert WeightRouting("sampling").loss_weights(weights) is None
