"""Per-sample loss weights that aggregate the loss per domain first, then weight domains.

With `L = sum_d c_d * mean_{i in d} l_i` (c_d: the domain coefficients the curriculum provides) and a
loss that averages per-sample terms over the B samples of a batch, the same objective results from
per-sample weights `w_i = B * c_d(i) / n_d(i)` (n_d: samples of domain d in the batch). Guarantees:
equal-sized domains with equal coefficients give weights of exactly 1, and the weights of a batch sum
to `B * sum_d c_d` over the domains present. `weights_from_coefficients` converts coefficients that
already hold the whole normalisation (`loss = sum_i c_i * sum_t l_it`) into weights for any
aggregation mode. Not here: how the coefficients are chosen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from posttrain.algo.losses import Aggregation


def domain_sample_weights(
    domain_ids: Sequence[str], domain_coefs: Mapping[str, float] | None = None
) -> Tensor:
    """`[B]` weights that make every domain count `c_d` (default: `1 / number of domains present`)."""
    counts = Counter(domain_ids)
    if not counts:
        return torch.zeros(0)
    if domain_coefs is None:
        domain_coefs = {domain: 1.0 / len(counts) for domain in counts}
    missing = sorted(set(counts) - set(domain_coefs))
    if missing:
        raise KeyError(f"no coefficient for domains {missing}")
    batch_size = len(domain_ids)
    return torch.tensor([batch_size * domain_coefs[d] / counts[d] for d in domain_ids], dtype=torch.float32)


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
