"""Decode staging: staged attention equals attention over the pool; reuse, cuts and rebuilds stay exact."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from posttrain.rollout import GenerationRequest, NativeEngine, NativeEngineConfig, SamplingParams
from posttrain.rollout.engine.decode_stage import StageCache
from posttrain.rollout.engine.model import attend
from posttrain.rollout.engine.seq_state import SeqState
from tests.rollout.conftest import full_logits, prompt

BS = 4  # block size
L, SLOTS, HKV, H, D = 2, 100 * BS, 2, 4, 8


def _seq(seq_id: int, table: list[int]) -> SeqState:
    return SeqState(seq_id, 0, 0, [0], 1, SamplingParams(), block_table=table)


def _reference(pool: tuple[torch.Tensor, torch.Tensor], layer: int, seq: SeqState, position: int,
               q: torch.Tensor) -> torch.Tensor:
    """Attention of one query `[H, D]` at `position` over the pool slots of positions 0..position."""
    positions = torch.arange(position + 1)
    slots = torch.tensor(seq.block_table)[positions // BS] * BS + positions % BS
    k, v = pool[0][layer, slots].transpose(0, 1), pool[1][layer, slots].transpose(0, 1)  # [Hkv, S, D]
    mask = torch.ones(1, 1, 1, len(slots), dtype=torch.bool)
    return attend(q[None, :, None], k[None], v[None], mask)[0, :, 0]  # [H, D]


def _step(cache: StageCache, pool: tuple[torch.Tensor, torch.Tensor], seqs: list[SeqState], starts: list[int],
          shared: list[int]) -> float:
    """One decode step through a stage: write new KV to pool and stage; max error vs the reference."""
    gen = torch.Generator().manual_seed(sum(starts))
    stage = cache.use(seqs, starts, shared)
    err = 0.0
    for layer in range(L):
        k_new, v_new, q = (torch.randn(len(seqs), n, D, generator=gen) for n in (HKV, HKV, H))
        for b, (seq, p) in enumerate(zip(seqs, starts, strict=True)):
            slot = seq.block_table[p // BS] * BS + p % BS
            pool[0][layer, slot], pool[1][layer, slot] = k_new[b], v_new[b]
        stage.write(layer, k_new, v_new)
        out = stage.attend(layer, q)
        for b, (seq, p) in enumerate(zip(seqs, starts, strict=True)):
            err = max(err, (out[b] - _reference(pool, layer, seq, p, q[b])).abs().max().item())
    cache.end_step()
    return err


def test_staged_attention_equals_pool_attention_through_reuse_growth_cuts_and_rebuilds() -> None:
    gen = torch.Generator().manual_seed(0)
    pool = (torch.randn(L, SLOTS, HKV, D, generator=gen), torch.randn(L, SLOTS, HKV, D, generator=gen))
    shared = [0, 1, 2]  # a 12-token prompt in blocks 0-2, then a copied partial block each
    seqs = [_seq(i, shared + [3 + 30 * i + j for j in range(30)]) for i in range(3)]
    cache = StageCache(pool[0], pool[1], BS)
    starts = [13, 12, 12]
    errors = []
    for _ in range(70):  # past the initial capacity of 64 staged positions
        errors.append(_step(cache, pool, seqs, starts, shared))
        starts = [p + 1 for p in starts]
    assert (cache.counters["decode_stage_builds"], cache.counters["decode_stage_cuts"]) == (1, 0)
    grown_mb = 2 * L * 3 * HKV * 128 * D * 4 / 2**20  # keys and values of 3 members, grown to 128
    assert cache.counters["peak_decode_stage_mb"] >= grown_mb
    seqs, starts = [seqs[0], seqs[2]], [starts[0], starts[2]]  # sample 1 finished
    errors.append(_step(cache, pool, seqs, starts, shared))
    assert (cache.counters["decode_stage_builds"], cache.counters["decode_stage_cuts"]) == (1, 1)
    seqs[1].block_table = list(seqs[1].block_table)  # a new table object: preempted and readmitted
    errors.append(_step(cache, pool, seqs, [p + 1 for p in starts], []))
    assert cache.counters["decode_stage_builds"] == 2
    assert max(errors) < 1e-5


def test_group_with_stop_tokens_matches_samples_run_alone(qwen2: Any) -> None:
    # samples of one group stop at different steps, so the group's stage is cut as they finish
    ids = prompt(18)
    params = SamplingParams(n=6, max_new_tokens=40, temperature=1.0, seed=5, stop_token_ids=(7, 11, 13))
    engine = NativeEngine(qwen2, NativeEngineConfig(block_size=4, shared_prefix_min_blocks=1))
    group = engine.generate([GenerationRequest(prompt_ids=ids, params=params)])[0].samples
    assert len({len(s.token_ids) for s in group}) > 1
    assert engine.stats()["decode_stage_cuts"] > 0
    for j, sample in enumerate(group):
        alone_params = params.model_copy(update={"n": 1, "seed": 5 + j})
        alone = NativeEngine(qwen2, NativeEngineConfig(block_size=4)).generate(
            [GenerationRequest(prompt_ids=ids, params=alone_params)])[0].samples[0]
        assert alone.token_ids == sample.token_ids
        logits = full_logits(qwen2, ids + sample.token_ids)[len(ids) - 1 : -1]
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(sample.token_ids)[:, None])[:, 0]
        assert (torch.tensor(sample.logprobs) - expected).abs().max().item() < 1e-4


def test_decode_reuses_its_stage_between_steps(qwen2: Any) -> None:
    engine = NativeEngine(qwen2, NativeEngineConfig(block_size=4))
    params = SamplingParams(n=3, max_new_tokens=12, temperature=0.0)
    engine.generate([GenerationRequest(prompt_ids=prompt(10), params=params)])
    stats = engine.stats()
    assert stats["decode_stage_builds"] <= 2 < stats["steps"]


def test_stage_is_sized_to_the_members_budget_and_still_grows_past_it() -> None:
    gen = torch.Generator().manual_seed(1)
    pool = (torch.randn(L, SLOTS, HKV, D, generator=gen), torch.randn(L, SLOTS, HKV, D, generator=gen))
    shared = [0, 1, 2]
    budget = SamplingParams(max_new_tokens=20)  # 12-token prompts: positions 12..31 lie past the prefix
    seqs = [SeqState(i, 0, i, [0] * 12, 12, budget, block_table=shared + [3 + 10 * i + j for j in range(10)])
            for i in range(2)]
    cache = StageCache(pool[0], pool[1], BS)
    starts, errors, capacities = [12, 12], [], []
    for _ in range(26):  # the whole budget, then 6 positions past it (a caller that ignores the budget)
        errors.append(_step(cache, pool, seqs, starts, shared))
        starts = [p + 1 for p in starts]
        stage = cache.find(seqs, starts)
        assert stage is not None
        capacities.append(stage.capacity)
    assert capacities[:20] == [20] * 20  # exactly the reachable room, never grown inside the budget
    assert min(capacities[20:]) > 20  # past it, growth keeps the stage exact
    assert cache.counters["decode_stage_builds"] == 1
    assert max(errors) < 1e-5


def _budget_seq(seq_id: int, table: list[int], prompt_len: int) -> SeqState:
    return SeqState(seq_id, 0, 0, [0] * prompt_len, prompt_len, SamplingParams(max_new_tokens=200),
                    block_table=table)


def _staged_view(stage: Any, seq: SeqState) -> tuple[torch.Tensor, torch.Tensor]:
    """The staged keys and values `[L, Hkv, n, D]` of one member."""
    row = stage.seq_ids.index(seq.seq_id)
    n = stage.lengths[row]
    return stage.k[:, row, :, :n], stage.v[:, row, :, :n]


def _churn(shared: list[int]) -> None:
    """Members join and leave a stage over many steps; every step equals attention over the pool,
    every row equals the same member gathered fresh, and rows are reused (no unbounded growth)."""
    gen = torch.Generator().manual_seed(3)
    slots = 300 * BS  # room for 24 members of 12 blocks each
    pool = (torch.randn(L, slots, HKV, D, generator=gen), torch.randn(L, slots, HKV, D, generator=gen))
    first = len(shared) * BS

    def fresh(i: int) -> tuple[SeqState, int]:
        own = [len(shared) + 12 * i + j for j in range(12)]  # 48 positions of its own room
        return _budget_seq(i, shared + own, first), first + 1 + int(torch.randint(0, 10, (1,), generator=gen))

    live = [fresh(i) for i in range(3)]
    cache = StageCache(pool[0], pool[1], BS)
    errors, rows, next_id = [], [], 3
    for step in range(40):
        errors.append(_step(cache, pool, [s for s, _ in live], [p for _, p in live], shared))
        stage = cache.find([s for s, _ in live], [p + 1 for _, p in live])
        assert stage is not None
        rows.append(stage.k.shape[1])
        if step % 7 == 6:  # every member against one stage gathered fresh
            rebuilt = StageCache(pool[0], pool[1], BS).use([s for s, _ in live], [p + 1 for _, p in live], shared)
            for s, _ in live:  # (the rebuilt stage has also made room for its next position)
                for a, b in zip(_staged_view(stage, s), _staged_view(rebuilt, s), strict=True):
                    assert torch.equal(a, b[:, :, : a.shape[2]])
        live = [(s, p + 1) for s, p in live]
        leave = [i for i in range(len(live)) if torch.rand(1, generator=gen).item() < 0.25 or live[i][1] > first + 40]
        live = [m for i, m in enumerate(live) if i not in leave[:len(live) - 1]]  # keep one: the prefix stays held
        for _ in range(int(torch.randint(0, 3, (1,), generator=gen)) if next_id < 20 else 0):
            live.insert(int(torch.randint(0, len(live) + 1, (1,), generator=gen)), fresh(next_id))
            next_id += 1
    counters = cache.counters
    assert counters["decode_stage_builds"] == 1  # never rebuilt: joins and leaves touch only their rows
    assert counters["decode_stage_joins"] >= 10 and counters["decode_stage_cuts"] >= 10
    assert max(rows) <= 8  # freed rows are reused
    assert max(errors) < 1e-5


def test_joins_and_leaves_keep_a_stage_exact_and_equal_to_one_gathered_fresh() -> None:
    _churn([])


def test_joins_and_leaves_keep_a_shared_prefix_stage_exact() -> None:
    _churn([0, 1, 2])


def test_rows_shrink_when_most_members_left() -> None:
    gen = torch.Generator().manual_seed(4)
    pool = (torch.randn(L, SLOTS, HKV, D, generator=gen), torch.randn(L, SLOTS, HKV, D, generator=gen))
    seqs = [_budget_seq(i, [3 * i + j for j in range(3)], 2) for i in range(16)]
    cache = StageCache(pool[0], pool[1], BS)
    starts = [2] * 16
    errors = [_step(cache, pool, seqs, starts, [])]
    seqs, starts = seqs[5:7] + seqs[12:13], [3] * 3  # the survivors sit in high rows
    errors.append(_step(cache, pool, seqs, starts, []))
    stage = cache.find(seqs, [4] * 3)
    assert stage is not None and stage.k.shape[1] < 16
    errors.append(_step(cache, pool, seqs[::-1], [4] * 3, []))  # any member order
    assert cache.counters["decode_stage_builds"] == 1
    assert max(errors) < 1e-5


def test_requests_arriving_while_others_decode_match_a_no_cache_forward(qwen2: Any) -> None:
    # single sequences and one group arrive between steps and stop at different lengths, so decode
    # stages gain and lose members at most steps; every logprob equals the full forward's
    engine = NativeEngine(qwen2, NativeEngineConfig(block_size=4, shared_prefix_min_blocks=2))
    waves = [[GenerationRequest(prompt_ids=prompt(9 + 3 * i, seed=i), params=SamplingParams(
        n=3 if i == 2 else 1, max_new_tokens=6 + 4 * (i % 3), temperature=1.0, seed=i, stop_token_ids=(7,)))
        for i in range(w * 3, w * 3 + 3)] for w in range(3)]
    submitted = []
    for wave in waves:
        submitted += [(r, seqs) for r, seqs in zip(wave, engine.submit(wave), strict=True)]
        for _ in range(4):
            engine.step()
    while engine.has_work:
        engine.step()
    stats = engine.stats()
    assert stats["decode_stage_joins"] > 0 and stats["decode_stage_cuts"] > 0
    for request, seqs in submitted:
        for seq in seqs:
            ids = list(request.prompt_ids) + seq.generated_ids
            logits = full_logits(qwen2, ids)[len(request.prompt_ids) - 1 : -1]
            expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(seq.generated_ids)[:, None])[:, 0]
            assert (torch.tensor(seq.logprobs) - expected).abs().max().item() < 1e-4


def test_prefix_attention_kernel_equals_softmax_attention() -> None:
    """The CPU flash form of the shared-prefix attention = softmax(q k^T) v, with the same log-sum-exp,
    for several prefixes at once (query block i attends prefix i)."""
    from posttrain.rollout.engine.stage_prefix import prefix_attention

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 2, n, 16, generator=gen) for n in (24, 300, 300))  # [N, Hkv, M or P, D]
    out, lse = prefix_attention(q, k, v)
    scores = q @ k.transpose(-1, -2)  # [N, Hkv, M, P]
    assert (out - torch.softmax(scores, -1) @ v).abs().max().item() < 1e-5
    assert (lse - torch.logsumexp(scores, -1, keepdim=True)).abs().max().item() < 1e-5


def _assign_step(cache: StageCache, pool: tuple[torch.Tensor, torch.Tensor], seqs: list[SeqState],
                 starts: list[int], shared: list[list[int]]) -> float:
    """`_step` for members that each attend their own `shared` blocks apart, through `assign`."""
    gen = torch.Generator().manual_seed(sum(starts))
    placed = cache.assign(seqs, starts, shared)
    assert sorted(i for _, idx in placed for i in idx) == list(range(len(seqs)))
    err = 0.0
    for layer in range(L):
        k_new, v_new, q = (torch.randn(len(seqs), n, D, generator=gen) for n in (HKV, HKV, H))
        for b, (seq, p) in enumerate(zip(seqs, starts, strict=True)):
            slot = seq.block_table[p // BS] * BS + p % BS
            pool[0][layer, slot], pool[1][layer, slot] = k_new[b], v_new[b]
        for stage, idx in placed:
            index = torch.tensor(idx)
            stage.write(layer, k_new[index], v_new[index])
            out = stage.attend(layer, q[index])
            for row, b in enumerate(idx):
                err = max(err, (out[row] - _reference(pool, layer, seqs[b], starts[b], q[b])).abs().max().item())
    cache.end_step()
    return err


def test_members_of_several_prefixes_and_of_none_share_one_stage_exactly() -> None:
    # two GRPO-like groups (prefix blocks 0-2 and 3-4) and two members without a prefix, in one size
    # class: one stage, one kernel call per prefix, rows in any order, members leaving and joining
    gen = torch.Generator().manual_seed(5)
    pool = (torch.randn(L, SLOTS, HKV, D, generator=gen), torch.randn(L, SLOTS, HKV, D, generator=gen))
    groups = {0: [0, 1, 2], 1: [3, 4], 2: []}
    seqs, shared, starts = [], [], []
    for i in range(8):
        g = i % 3
        own = [10 + 6 * i + j for j in range(6)]
        table = groups[g] + own if g < 2 else [60 + 6 * i + j for j in range(8)]
        seqs.append(_budget_seq(i, table, 4 * len(groups[g]) + 1))
        shared.append(groups[g])
        starts.append(4 * len(groups[g]) + 1 + i % 2)
    cache = StageCache(pool[0], pool[1], BS)
    errors = []
    for step in range(6):
        order = list(range(len(seqs)))[::-1] if step % 2 else list(range(len(seqs)))
        errors.append(_assign_step(cache, pool, [seqs[i] for i in order], [starts[i] for i in order],
                                   [shared[i] for i in order]))
        starts = [p + 1 for p in starts]
        if step == 2:  # one member of each kind leaves
            keep = [i for i in range(len(seqs)) if i not in (0, 4, 2)]
            seqs, shared, starts = [seqs[i] for i in keep], [shared[i] for i in keep], [starts[i] for i in keep]
    counters = cache.counters
    assert counters["decode_stage_builds"] == 1 and counters["decode_prefix_builds"] == 2
    assert counters["decode_stage_cuts"] == 3
    assert max(errors) < 1e-5


@pytest.mark.parametrize("stack", [True, False])
def test_prefixes_of_one_length_are_attended_in_one_call_exactly(stack: bool, monkeypatch: Any) -> None:
    """Three prefixes of two blocks each with 3, 1 and 2 members (padded to 3 query rows per prefix),
    plus two members without one, in shuffled order: one stacked bank and one kernel call for the
    three, reused while they last, with each member's attention equal to the full softmax; with
    stacking off (prefixes over `BANK_BYTES`) one call per prefix gives the same."""
    import posttrain.rollout.engine.stage_prefix as stage_prefix

    if not stack:
        monkeypatch.setattr(stage_prefix, "BANK_BYTES", 0)
    gen = torch.Generator().manual_seed(8)
    pool = (torch.randn(L, SLOTS, HKV, D, generator=gen), torch.randn(L, SLOTS, HKV, D, generator=gen))
    prefixes = [[0, 1], [2, 3], [4, 5]]
    kinds = [0, 2, 0, None, 1, 2, 0, None]
    seqs, shared, starts = [], [], []
    for i, kind in enumerate(kinds):
        own = [10 + 6 * i + j for j in range(6)]
        table = (prefixes[kind] if kind is not None else [70 + 2 * i, 71 + 2 * i]) + own
        shared.append(prefixes[kind] if kind is not None else [])
        seqs.append(_budget_seq(i, table, 9))
        starts.append(9 + i % 3)
    cache = StageCache(pool[0], pool[1], BS)
    errors, banks = [], []
    for step in range(4):
        order = [3, 0, 6, 1, 7, 4, 2, 5] if step % 2 else list(range(len(seqs)))
        errors.append(_assign_step(cache, pool, [seqs[i] for i in order], [starts[i] for i in order],
                                   [shared[i] for i in order]))
        (stage,) = {id(s): s for s in cache._stages.values()}.values()
        assert len(stage._plan) == (1 if stack else 3)
        banks.append(stage._plan[0].bank)
        starts = [p + 1 for p in starts]
    assert max(errors) < 1e-5
    if stack:
        assert banks[0].k.shape[1] == 3 and all(b is banks[0] for b in banks)


def test_members_needing_much_more_room_get_their_own_stage() -> None:
    # a member that can reach 200 own positions does not widen the rows of members that reach 8
    gen = torch.Generator().manual_seed(6)
    pool = (torch.randn(L, SLOTS, HKV, D, generator=gen), torch.randn(L, SLOTS, HKV, D, generator=gen))
    short = [SeqState(i, 0, i, [0] * 12, 12, SamplingParams(max_new_tokens=8),
                      block_table=[0, 1, 2, 10 + 3 * i, 11 + 3 * i, 12 + 3 * i]) for i in range(3)]
    long = _budget_seq(3, [40 + j for j in range(60)], 20)
    seqs, starts = [*short, long], [12, 12, 12, 20]
    cache = StageCache(pool[0], pool[1], BS)
    err = _assign_step(cache, pool, seqs, starts, [[0, 1, 2]] * 3 + [[]])
    placed = cache.assign(seqs, [p + 1 for p in starts], [[0, 1, 2]] * 3 + [[]])
    assert sorted(idx for _, idx in placed) == [[0, 1, 2], [3]]
    # the short members' rows hold exactly their 8 reachable positions; the long one's start at 64
    assert {stage.capacity for stage, _ in placed} == {8, 64}
    assert err < 1e-5


def test_groups_under_a_short_common_head_get_their_own_prefixes(qwen2: Any) -> None:
    # two GRPO groups whose prompts share one block (a chat template's head) and then differ for five:
    # each group attends its own prompt apart (sharing only the head, below the threshold of two
    # blocks, they were all left without a prefix); logprobs stay those of a full forward
    head = prompt(4, seed=9)
    engine = NativeEngine(qwen2, NativeEngineConfig(block_size=4, shared_prefix_min_blocks=2))
    params = SamplingParams(n=3, max_new_tokens=6, temperature=1.0, seed=1)
    requests = [GenerationRequest(prompt_ids=head + prompt(21, seed=10 + i), params=params) for i in range(2)]
    outputs = engine.generate(requests)
    assert engine.stats()["decode_prefix_builds"] == 2
    for request, output in zip(requests, outputs, strict=True):
        ids = list(request.prompt_ids)
        for sample in output.samples:
            logits = full_logits(qwen2, ids + sample.token_ids)[len(ids) - 1 : -1]
            expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(sample.token_ids)[:, None])[:, 0]
            assert (torch.tensor(sample.logprobs) - expected).abs().max().item() < 1e-4
