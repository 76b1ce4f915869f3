"""KL estimators, token log-probabilities and entropy against values worked out by hand."""

from __future__ import annotations

import math

import torch

from posttrain.algo import entropy_from_logits, kl_k1, kl_k3, token_logprobs


def test_k1_is_log_ratio() -> None:
    # log 0.5 - log 0.25 = log 2 = 0.693147
    out = kl_k1(torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)]))
    torch.testing.assert_close(out, torch.tensor([0.693147]))


def test_k3_by_hand() -> None:
    # log r = log ref - log pi = log 0.5 = -0.693147; k3 = r - 1 - log r = 0.5 - 1 + 0.693147 = 0.193147
    out = kl_k3(torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)]))
    torch.testing.assert_close(out, torch.tensor([0.193147]))


def test_k3_is_zero_at_equal_policies_and_positive_elsewhere() -> None:
    logprobs = torch.log_softmax(torch.randn(4, 8, generator=torch.Generator().manual_seed(0)), -1)
    assert torch.equal(kl_k3(logprobs, logprobs), torch.zeros_like(logprobs))
    assert (kl_k3(logprobs, logprobs.roll(1, dims=1)) >= 0).all()


def test_entropy_by_hand() -> None:
    # uniform over 2: log 2 = 0.693147
    # logits [0, log 3] -> p = [0.25, 0.75]: H = 0.25 * 1.386294 + 0.75 * 0.287682 = 0.562335
    logits = torch.tensor([[[0.0, 0.0], [0.0, math.log(3.0)]]])
    torch.testing.assert_close(entropy_from_logits(logits), torch.tensor([[0.693147, 0.562335]]))


def test_token_logprobs_by_hand() -> None:
    # logits [0, log 3] -> log p = [log 0.25, log 0.75] = [-1.386294, -0.287682]
    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, math.log(3.0)]]])
    out = token_logprobs(logits, torch.tensor([[1, 0]]))
    torch.testing.assert_close(out, torch.tensor([[-0.287682, -1.386294]]))


def test_chunking_does_not_change_results() -> None:
    logits = torch.randn(2, 7, 11, generator=torch.Generator().manual_seed(1))
    ids = torch.randint(0, 11, (2, 7), generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(entropy_from_logits(logits, chunk_size=3), entropy_from_logits(logits))
    torch.testing.assert_close(token_logprobs(logits, ids, chunk_size=2), token_logprobs(logits, ids))
    manual = torch.log_softmax(logits, -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(token_logprobs(logits, ids, chunk_size=2), manual)
