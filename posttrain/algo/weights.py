"""Per-sample loss weights that aggregate the loss per domain first, then weight domains.

With `L = sum_d c_d * mean_{i in d} l_i` (c_d: the domain coefficients the curriculum provides) and a
loss that averages per-sample terms over the B samples of a batch, the same objective results from
per-sample weights `w_i = B * c_d(i) / n_d(i)` (n_d: samples of domain d in the batch). Guarantees:
equal-sized domains with equal coefficients give weights of exactly 1, and the weights of a batch sum
to `B * sum_d c_d` over the domains present. Not here: how the coefficients are chosen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor


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
