"""Per-sample loss weights from per-sample loss coefficients.

`weights_from_coefficients` converts coefficients that already hold the whole normalisation
(`loss = sum_i c_i * sum_t l_it`, as `posttrain.curriculum.domain_loss_coefficients` produces) into the
`sample_weights` that give the same loss under any aggregation mode. Not here: how the coefficients are
chosen (the curriculum decides).
"""

from __future__ import annotations

from collections.abc import Sequence

from posttrain.algo.losses import Aggregation


def weights_from_coefficients(
    coefficients: Sequence[float],
    token_counts: Sequence[int],
    aggregation: Aggregation,
    norm_num_tokens: int | None = None,
) -> list[float]:
    """Per-sample weights that turn `aggregation` into `loss = sum_i coef_i * sum_t loss_{i,t}`.

    For coefficients that already contain the whole normalisation (as `posttrain.curriculum`'s loss
    weighting produces): each aggregation divides by its own counts, which these weights multiply back.
    Exact when one optimizer step sees the whole batch (`PolicyConfig.mini_batches == 1`).
    """
    if len(coefficients) != len(token_counts):
        raise ValueError("coefficients and token_counts must have the same length")
    num_seqs = len(token_counts)
    if aggregation == "token_mean":
        total = max(sum(token_counts), 1)
        return [c * total for c in coefficients]
    if aggregation == "seq_mean_token_mean":
        return [c * num_seqs * max(t, 1) for c, t in zip(coefficients, token_counts, strict=True)]
    length = norm_num_tokens if norm_num_tokens is not None else max(max(token_counts, default=1), 1)
    return [c * num_seqs * length for c in coefficients]
