"""RL maths as pure tensor functions: group advantages, the clipped policy loss, KL and entropy.

Nothing here touches a model, an optimizer or a device beyond the tensors it is given.
"""

from posttrain.algo.advantages import group_advantages, ragged_group_advantages
from posttrain.algo.kl import entropy_from_logits, kl_k1, kl_k3, kl_penalty, token_logprobs
from posttrain.algo.losses import (
    Aggregation,
    LossConfig,
    Normalizer,
    PolicyLoss,
    RatioLevel,
    aggregate,
    clipped_surrogate,
    log_importance_ratio,
    policy_loss,
)
from posttrain.algo.weights import weights_from_coefficients

__all__ = [
    "Aggregation",
    "LossConfig",
    "Normalizer",
    "PolicyLoss",
    "RatioLevel",
    "aggregate",
    "clipped_surrogate",
    "entropy_from_logits",
    "group_advantages",
    "kl_k1",
    "kl_k3",
    "kl_penalty",
    "log_importance_ratio",
    "policy_loss",
    "ragged_group_advantages",
    "token_logprobs",
    "weights_from_coefficients",
]
