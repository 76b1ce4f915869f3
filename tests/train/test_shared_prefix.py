"""The shared-prefix forward equals the padded forward (logits, gradients, whole policy steps)."""

from __future__ import annotations

import copy
import random
from typing import Any
from unittest.mock import patch

import pytest
import torch

from posttrain.train import _prefix
from posttrain.train import policy as policy_module
from posttrain.train._batching import pad_pairs
from posttrain.train._prefix import (
    common_prefix_len,
    group_starts,
    grouped_prefix_forward,
    micro_batches,
    sft_loss_backward,
    shared_prefix_forward,
)
from posttrain.train.models import TinyModelConfig, tiny_random
from posttrain.train.policy import PolicyConfig, PolicyTrainer, TrainBatch


def _rows(seed: int = 0) -> tuple[list[list[int]], list[list[int]]]:
    """Two documents of 40 tokens, three questions each (two asked twice, as in a GRPO group)."""
    rng = random.Random(seed)
    docs = [[rng.randrange(2, 120) for _ in range(40)] for _ in range(2)]
    prompts, responses = [], []
    for doc in docs:
        questions = [[rng.randrange(2, 120) for _ in range(rng.randrange(1, 6))] for _ in range(3)]
        for question in [*questions, questions[0], questions[1]]:
            prompts.append(doc + question)
            responses.append([rng.randrange(2, 120) for _ in range(rng.randrange(1, 7))])
    return prompts, responses


def test_common_prefix_len_stops_at_first_difference_padding_or_limit() -> None:
    ids = torch.tensor([[5, 6, 7, 8], [5, 6, 9, 8]])
    mask = torch.ones_like(ids)
    assert common_prefix_len(ids, mask, limit=4) == 2
    assert common_prefix_len(ids, mask, limit=1) == 1
    same = torch.tensor([[5, 6, 7, 0], [5, 6, 7, 8]])
    assert common_prefix_len(same, torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]), limit=4) == 3


@pytest.mark.parametrize("checkpointing", [False, True])
@pytest.mark.parametrize("cascade", [True, False])
def test_shared_forward_matches_padded_logits_and_gradients(cascade: bool, checkpointing: bool,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Both paths: the cascade (Qwen2 here) and the repeated prefix cache other models get; with gradient
    checkpointing on, the prefix still yields its cache and the cascade's rows are checkpointed."""
    assert _prefix.cascades(tiny_random(TinyModelConfig(hidden_size=32, num_layers=2)))
    monkeypatch.setattr(_prefix, "cascades", lambda _model: cascade)
    model = tiny_random(TinyModelConfig(hidden_size=32, num_layers=2)).double().train()
    prompts, responses = _rows()
    first = prompts[:5]  # one document: rows share exactly its 40 tokens
    pairs = pad_pairs(first, responses[:5])
    shared = common_prefix_len(pairs.input_ids, pairs.attention_mask, limit=pairs.first_kept)
    assert shared == 40
    padded_model, shared_model = model, copy.deepcopy(model)
    recomputed: list[bool] = []
    if checkpointing:
        shared_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        shared_model.model.layers[0].self_attn.register_forward_hook(lambda *_: recomputed.append(True))
    padded = padded_model(input_ids=pairs.input_ids, attention_mask=pairs.attention_mask,
                          logits_to_keep=pairs.num_kept).logits  # fmt: skip
    reused = shared_prefix_forward(shared_model, pairs.input_ids, pairs.attention_mask, shared, pairs.num_kept)
    mask = pairs.attention_mask[:, pairs.first_kept :].unsqueeze(-1).double()  # padding logits may differ
    torch.testing.assert_close(reused * mask, padded * mask, atol=1e-9, rtol=1e-9)
    weights = torch.randn_like(padded)
    (padded * mask * weights).sum().backward()
    (reused * mask * weights).sum().backward()
    for (name, a), (_, b) in zip(padded_model.named_parameters(), shared_model.named_parameters(), strict=True):
        # eager attention takes its softmax in float32, hence rounding of about 1e-8 relative
        torch.testing.assert_close(b.grad, a.grad, atol=1e-6 * float(a.grad.abs().max()), rtol=0, msg=name)
    if checkpointing:  # prefix and rows forward, then (cascade only) both again in the backward
        assert len(recomputed) == (4 if cascade else 2)
    # the cascade stays installed; any other forward (left padding here) computes what it did before
    ids = torch.tensor([[0, 0, 5, 6, 7, 8], [9, 10, 11, 12, 13, 14]])
    left = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        before = padded_model(input_ids=ids, attention_mask=left).logits
        after = shared_model(input_ids=ids, attention_mask=left).logits
    real = left.bool()
    torch.testing.assert_close(after[real], before[real], atol=1e-6, rtol=0)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_grouped_forward_matches_padded_logits_and_gradients(checkpointing: bool) -> None:
    """A document, then questions asked by several rows each (a GRPO group): the document once, each
    question once, each row from its prompt's last token; the response logits and all gradients are the
    padded forward's."""
    model = tiny_random(TinyModelConfig(hidden_size=32, num_layers=2)).double().train()
    prompts, responses = _rows()
    pairs = pad_pairs(prompts[:5], responses[:5])  # one document; questions 0 and 1 asked twice
    shared = common_prefix_len(pairs.input_ids, pairs.attention_mask, limit=pairs.first_kept)
    response_starts = (pairs.first_kept + pairs.response_index[:, 0]).tolist()
    starts = group_starts(pairs.input_ids, shared, response_starts)
    assert starts == response_starts
    assert group_starts(pairs.input_ids[:3], shared, response_starts[:3]) is None  # no question repeated
    padded_model, grouped_model = model, copy.deepcopy(model)
    if checkpointing:
        grouped_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    padded = padded_model(input_ids=pairs.input_ids, attention_mask=pairs.attention_mask,
                          logits_to_keep=pairs.num_kept).logits  # fmt: skip
    grouped = grouped_prefix_forward(grouped_model, pairs.input_ids, pairs.attention_mask, shared, starts,
                                     pairs.first_kept)  # fmt: skip
    index = pairs.response_index[..., None].expand(-1, -1, padded.shape[-1])
    mask = pairs.response_mask[..., None].double()  # the columns the loss reads: each response token's
    want, got = padded.gather(1, index) * mask, grouped.gather(1, index) * mask
    torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-9)
    weights = torch.randn_like(want)
    (want * weights).sum().backward()
    (got * weights).sum().backward()
    for (name, a), (_, b) in zip(padded_model.named_parameters(), grouped_model.named_parameters(), strict=True):
        torch.testing.assert_close(b.grad, a.grad, atol=1e-6 * float(a.grad.abs().max()), rtol=0, msg=name)


def test_checkpointed_prefix_keeps_only_its_layer_inputs_and_keys() -> None:
    """With gradient checkpointing on, the prefix's forward keeps for the backward pass no more than
    each layer's input (outside the checkpointed layers); with it off, every activation of every layer."""
    model = tiny_random(TinyModelConfig(hidden_size=32, num_layers=4)).double().train()
    ids = torch.randint(2, 120, (1, 64))

    def saved_bytes(checkpointing: bool) -> int:
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_disable()
        sizes: list[int] = []

        def pack(tensor: torch.Tensor) -> torch.Tensor:
            sizes.append(tensor.numel() * tensor.element_size())
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            kv = _prefix._prefix_kv(model, ids, 64)
        assert len(kv) == 4 and kv[0][0].shape == (1, model.config.num_key_value_heads, 64, 8)
        assert kv[0][0].requires_grad
        return sum(sizes)

    kept, all_of_it = saved_bytes(True), saved_bytes(False)
    assert kept < all_of_it / 10, (kept, all_of_it)


def test_micro_batches_group_rows_by_long_prompt_prefix() -> None:
    prompts = [[1] * 10 + [2], [3] * 11, [1] * 10 + [4], [5], [3] * 12, [6] * 11]
    assert micro_batches(prompts, range(6), size=8, min_tokens=None) == [[0, 1, 2, 3, 4, 5]]
    assert micro_batches(prompts, range(6), size=8, min_tokens=10) == [[0, 2], [1, 4], [3, 5]]
    assert micro_batches(prompts, range(6), size=1, min_tokens=10) == [[0], [2], [1], [4], [3], [5]]


@pytest.mark.parametrize(("shared_min", "micro"), [(None, 3), (8, 3), (8, 5)])
def test_policy_step_is_the_same_with_and_without_prefix_sharing(shared_min: int | None, micro: int) -> None:
    """Micro-batches of 5 hold a document's two repeated questions (the grouped forward), of 3 none."""
    prompts, responses = _rows(1)
    grouped_calls: list[int] = []
    real_grouped = policy_module.grouped_prefix_forward

    def counting(*args: Any, **kwargs: Any) -> torch.Tensor:
        grouped_calls.append(1)
        return real_grouped(*args, **kwargs)

    advantages = [1.0, -1.0, 0.5, 2.0, -0.5, 0.3, -0.2, 1.5, -1.5, 0.7]
    results = []
    for minimum in (None, shared_min):
        torch.manual_seed(0)
        model = tiny_random(TinyModelConfig(hidden_size=32, num_layers=2)).double()
        trainer = PolicyTrainer(model, PolicyConfig(lr=1e-2, micro_batch_size=micro, shared_prefix_min_tokens=minimum))
        batch = TrainBatch(prompt_ids=prompts, response_ids=responses, advantages=advantages,
                           domain_ids=["a", "b"] * 5)  # fmt: skip
        with patch.object(policy_module, "grouped_prefix_forward", counting):
            batch.old_logprobs = trainer.logprobs(prompts, responses)
            metrics = trainer.step(batch)
        results.append((batch.old_logprobs, metrics, trainer.logprobs(prompts, responses)))
    (old_a, metrics_a, new_a), (old_b, metrics_b, new_b) = results
    torch.testing.assert_close(torch.tensor(sum(old_b, [])), torch.tensor(sum(old_a, [])), atol=1e-9, rtol=0)
    torch.testing.assert_close(torch.tensor(sum(new_b, [])), torch.tensor(sum(new_a, [])), atol=1e-6, rtol=0)
    for key in ("loss", "loss/a", "loss/b"):
        assert metrics_b[key] == pytest.approx(metrics_a[key], abs=1e-6)  # float32 softmax rounding
    assert sum(new_a, []) != pytest.approx(sum(old_a, []), abs=1e-4)  # the step did move the policy
    assert bool(grouped_calls) == (shared_min is not None and micro == 5)


def test_sft_loss_with_shared_documents_equals_the_padded_loss_and_gradients() -> None:
    prompts, responses = _rows(2)
    width = max(len(p) + len(r) for p, r in zip(prompts, responses, strict=True))
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for row, (prompt, response) in enumerate(zip(prompts, responses, strict=True)):
        ids[row, : len(prompt) + len(response)] = torch.tensor(prompt + response)
        mask[row, : len(prompt) + len(response)] = 1
        labels[row, len(prompt) : len(prompt) + len(response)] = torch.tensor(response)
    torch.manual_seed(0)
    padded_model = tiny_random(TinyModelConfig(hidden_size=32, num_layers=2)).double()
    shared_model = copy.deepcopy(padded_model)
    expected = padded_model(input_ids=ids, attention_mask=mask, labels=labels).loss
    expected.backward()
    got = sft_loss_backward(shared_model, ids, mask, labels, min_tokens=8)
    assert got == pytest.approx(expected.item(), rel=1e-6)
    for (name, a), (_, b) in zip(padded_model.named_parameters(), shared_model.named_parameters(), strict=True):
        torch.testing.assert_close(b.grad, a.grad, atol=1e-6 * float(a.grad.abs().max()), rtol=0, msg=name)
