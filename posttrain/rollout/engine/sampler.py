"""Token sampling from rows of logits: temperature, top-k, top-p, per-sample seeded generators.

Guarantees: a sample's draws depend only on its own logits and its own `torch.Generator`, never on
which other sequences share the batch, so results do not change with scheduling. Every operation is
row-wise, so a batch of rows gives the same tokens as the rows one at a time. Sampling is by inverse
CDF: one uniform draw per token from the sample's generator, located in the float64 cumulative sum of
the unnormalised probabilities `exp(logits - max)` (one draw instead of a vocabulary of exponential
draws, which dominated the cost of a decode step on small models). The same sum gives the logprob of
the sampled distribution (`logits[token] - max - log(sum)`, in float64), so a row over a 49K-token
vocabulary is read a handful of times, not once per softmax, log-softmax and mask. Greedy
(temperature 0) is an argmax with ties going to the lowest token id, like `transformers`. The
returned logprob follows `SamplingParams.logprobs_mode` (see `posttrain.rollout.api`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from posttrain.rollout.api import SamplingParams


def make_generator(params: SamplingParams, sample_index: int, device: torch.device) -> torch.Generator:
    """Sample j of a request draws from its own generator seeded with seed + j."""
    seed = params.seed
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,)).item())
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + sample_index)
    return gen


def processed_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Temperature, then top-k, then top-p (nucleus) masking of raw logits `[..., V]` (float32).
    With temperature 1 and neither mask this is `logits` itself (dividing by 1 changes no value)."""
    scaled = logits / params.temperature if params.temperature != 1.0 else logits
    if params.top_k and params.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, params.top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # drop a token when the mass before it already reaches top_p (keeps at least one token)
        drop_sorted = (probs.cumsum(-1) - probs) >= params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        scaled = scaled.masked_fill(drop, float("-inf"))
    return scaled


def sample_tokens(logits: torch.Tensor, params: Sequence[SamplingParams],
                  generators: Sequence[torch.Generator | None]) -> tuple[list[int], list[float]]:
    """Next token and its logprob for every row of raw logits `[M, V]`; row i uses params[i], generators[i]."""
    raw = logits.float()
    groups = _rows_by_processing(params)
    if len(groups) == 1:  # every row processed alike: no row copies
        picked, logprobs = _sample_rows(raw, groups[0][0], generators)
        return picked.tolist(), logprobs.tolist()
    tokens = torch.empty(raw.shape[0], dtype=torch.long, device=raw.device)
    logprobs = torch.empty(raw.shape[0], dtype=torch.float32, device=raw.device)
    for p, rows in groups:
        index = torch.tensor(rows, dtype=torch.long, device=raw.device)
        tokens[index], logprobs[index] = _sample_rows(raw[index], p, [generators[i] for i in rows])
    return tokens.tolist(), logprobs.tolist()


def sample_token(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> tuple[int, float]:
    """Pick the next token from raw logits `[V]`; returns (token id, logprob)."""
    tokens, logprobs = sample_tokens(logits[None], [params], [generator])
    return tokens[0], logprobs[0]


def _rows_by_processing(params: Sequence[SamplingParams]) -> list[tuple[SamplingParams, list[int]]]:
    """Rows grouped by the fields that change how logits are processed (not by seed, n or stop ids,
    which differ between requests), with one params object of each group: a step over many requests
    with the same settings runs each operation once for all rows, not once per request (every
    operation is row-wise, so the rows' results do not change)."""
    groups: dict[tuple[float, int, float, str], tuple[SamplingParams, list[int]]] = {}
    for i, p in enumerate(params):
        key = (p.temperature, p.top_k, p.top_p, p.logprobs_mode)
        groups.setdefault(key, (p, []))[1].append(i)
    return list(groups.values())


def _sample_rows(raw: torch.Tensor, params: SamplingParams,
                 generators: Sequence[torch.Generator | None]) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens `[R]` and their float32 logprobs `[R]` for raw logits `[R, V]` sharing `params`."""
    if params.temperature == 0.0:
        picked = torch.argmax(raw, dim=-1)
        return picked, _log_softmax_at(raw, picked)
    final = processed_logits(raw, params)
    top = final.amax(-1, keepdim=True)  # [R, 1]
    weights = torch.exp(final - top)  # [R, V] unnormalised probabilities; masked tokens exactly 0
    cdf = weights.double().cumsum(-1)  # [R, V]
    total = cdf[:, -1]  # [R]
    u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64, device=raw.device) for g in generators])
    picked = torch.searchsorted(cdf, (u * total)[:, None], right=True)[:, 0]  # [R]
    # a draw below the total lands on a token whose weight is > 0; rounding can put it at the total:
    # then step back to the last token with weight > 0
    beyond = picked == raw.shape[-1]
    if bool(beyond.any()):
        last_kept = raw.shape[-1] - 1 - torch.argmax((weights.flip(-1) > 0).to(torch.uint8), dim=-1)
        picked = torch.where(beyond, last_kept, picked)
    if params.logprobs_mode == "raw" and final is not raw:
        return picked, _log_softmax_at(raw, picked)
    # log_softmax(final)[token] = final[token] - max - log(sum of weights), the sum being cdf's last entry
    chosen = final.gather(-1, picked[:, None])[:, 0].double()
    return picked, (chosen - top[:, 0].double() - total.log()).float()


def _log_softmax_at(logits: torch.Tensor, picked: torch.Tensor) -> torch.Tensor:
    """`log_softmax(logits)[picked]` per row `[R]`, without writing the `[R, V]` log-softmax."""
    return logits.gather(-1, picked[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)
