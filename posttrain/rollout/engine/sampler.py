"""Token sampling from rows of logits: temperature, top-k, top-p, per-sample seeded generators.

Guarantees: a sample's draws depend only on its own logits and its own `torch.Generator`, never on
which other sequences share the batch, so results do not change with scheduling. Every operation is
row-wise, so a batch of rows gives the same tokens as the rows one at a time. Sampling is by inverse
CDF: one uniform draw per token from the sample's generator, located in the float64 cumulative sum of
the unnormalised probabilities `exp(logits - max)` (one draw instead of a vocabulary of exponential
draws, which dominated the cost of a decode step on small models). The search has two levels: the
draw first picks a block of `CDF_BLOCK` tokens from the running sum of the blocks' float64 sums, then
a token inside that block from the block's own running sum, so only one block per row is converted to
float64 and scanned (a step of 32 rows over SmolLM2's 49K tokens spent 6.6 of its 11.9 ms of sampling
in the whole-vocabulary float64 copy and cumsum; with two levels the step's sampling takes 3.7 ms). On
CPU with `cpu_kernels` the block sums are added in float64 straight from the float32 row, without
the float64 copy that `sum(dtype=float64)` makes.
The sum of the block sums gives the logprob of the sampled distribution (`logits[token] - max -
log(sum)`, in float64), so a row is read a handful of times, not once per softmax, log-softmax and
mask. Greedy (temperature 0) is an argmax with ties going to the lowest token id, like `transformers`. The
returned logprob follows `SamplingParams.logprobs_mode` (see `posttrain.rollout.api`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from posttrain.rollout.api import SamplingParams
from posttrain.rollout.engine import cpu_kernels


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
    weights = torch.sub(final, top).exp_()  # [R, V] unnormalised probabilities; masked tokens exactly 0
    u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64, device=raw.device) for g in generators])
    picked, total = _inverse_cdf(weights, u)
    if params.logprobs_mode == "raw" and final is not raw:
        return picked, _log_softmax_at(raw, picked)
    # log_softmax(final)[token] = final[token] - max - log(sum of weights), that sum from `_inverse_cdf`
    chosen = final.gather(-1, picked[:, None])[:, 0].double()
    return picked, (chosen - top[:, 0].double() - total.log()).float()


CDF_BLOCK = 256
"""Tokens per block of the two-level inverse-CDF search (`_inverse_cdf`)."""


def _inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of non-negative `weights` `[R, V]` (at least one positive), the first token whose
    running float64 sum exceeds `u * total`, and the total `[R]` (float64), for uniform draws `u` `[R]`.

    A block of `CDF_BLOCK` tokens is chosen first (running sum of the blocks' sums), then the token
    inside it (running sum of its weights from the block's start). A token of weight 0 is never picked:
    each level's sum rises only at positive weights, and where rounding puts the target at or past a
    level's last sum (the block sums and the in-block sum add in different orders) the last positive
    block, or token, is taken instead.
    """
    rows, vocab = weights.shape
    dev = weights.device
    if dev.type == "cpu" and weights.dtype == torch.float32 and cpu_kernels.available():
        sums = cpu_kernels.block_sums(weights, CDF_BLOCK)  # [R, NB], no float64 copy of the rows
    else:
        whole = vocab // CDF_BLOCK * CDF_BLOCK
        sums = weights[:, :whole].view(rows, -1, CDF_BLOCK).sum(-1, dtype=torch.float64)  # [R, NB]
        if whole < vocab:
            sums = torch.cat([sums, weights[:, whole:].sum(-1, keepdim=True, dtype=torch.float64)], 1)
    cdf = sums.cumsum(-1)  # [R, NB]
    total = cdf[:, -1]
    target = (u * total)[:, None]  # [R, 1]
    block = torch.searchsorted(cdf, target, right=True)[:, 0]  # [R]
    blocks = cdf.shape[1]
    beyond = block == blocks
    if bool(beyond.any()):
        block = torch.where(beyond, blocks - 1 - torch.argmax((sums.flip(-1) > 0).to(torch.uint8), -1), block)
    before = torch.where(block > 0, cdf.gather(1, (block - 1).clamp(min=0)[:, None])[:, 0], 0.0)  # [R]
    # each row's block, padded past the vocabulary with weight 0 (never picked)
    index = block[:, None] * CDF_BLOCK + torch.arange(CDF_BLOCK, device=dev)  # [R, BLOCK]
    inside = weights.gather(1, index.clamp(max=vocab - 1)).masked_fill_(index >= vocab, 0.0)
    local = inside.double().cumsum(-1)  # [R, BLOCK]
    residual = (target[:, 0] - before).clamp(min=0.0)
    offset = torch.searchsorted(local, residual[:, None], right=True)[:, 0]  # [R]
    past = offset == CDF_BLOCK
    if bool(past.any()):
        last = CDF_BLOCK - 1 - torch.argmax((inside.flip(-1) > 0).to(torch.uint8), -1)
        offset = torch.where(past, last, offset)
    return block * CDF_BLOCK + offset, total


def _log_softmax_at(logits: torch.Tensor, picked: torch.Tensor) -> torch.Tensor:
    """`log_softmax(logits)[picked]` per row `[R]`, without writing the `[R, V]` log-softmax."""
    return logits.gather(-1, picked[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)
