"""The policy update: several epochs of the GRPO-family loss over a batch of scored responses.

`PolicyTrainer` wraps a `transformers` causal LM (optionally with LoRA adapters via `peft`), an AdamW
optimizer and a warmup + constant/cosine LR schedule. One `step(batch)` runs `epochs` passes over the
batch; each pass is split into `mini_batches` optimizer steps, each accumulated over micro-batches of
at most `micro_batch_size` samples. Micro-batches share their mini-batch's loss normaliser
(`posttrain.algo.Normalizer`), so gradients, and hence results, do not depend on `micro_batch_size`
beyond float rounding. Log-probabilities are teacher-forced on right-padded inputs (`_batching`).

`.model` is the live policy (the peft wrapper under LoRA); `.causal_lm` is the transformers model inside
it, the object an in-process rollout engine shares, since peft injects the adapters into its layers in
place; `policy_state()` is what weight sync sends (views of `.causal_lm`'s tensors, no copies).
A step leaves the model in the train/eval mode it found it in.

Guarantees: old-policy log-probabilities missing from the batch are computed once, before the first
epoch, in eval mode; the reference model (a frozen copy, or the adapter-free base under LoRA) is only
run when `loss.kl_beta > 0`; `state_dict()` snapshots everything needed for exact resume (weights or
adapter, optimizer, schedule, step, global RNG states). bf16 autocast is used on CUDA only.
Not here: sampling, rewards, advantages (the caller computes them) or writing files (`checkpoint`).
"""

from __future__ import annotations

import copy
import inspect
import math
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from posttrain.algo import Normalizer, entropy_from_logits, policy_loss, token_logprobs
from posttrain.train._batching import PaddedPairs, chunks, pad_floats, pad_pairs, unpad
from posttrain.train._policy_config import LoraConfig, PolicyConfig, lr_multiplier
from posttrain.train._prefix import (
    cascades,
    common_prefix_len,
    group_starts,
    grouped_prefix_forward,
    micro_batches,
    shared_prefix_forward,
)
from posttrain.train._rng import capture_rng, restore_rng
from posttrain.train.data_parallel import DataParallel
from posttrain.types import Trajectory

__all__ = ["LoraConfig", "PolicyConfig", "PolicyTrainer", "TrainBatch", "lr_multiplier", "wrap_lora"]


@dataclass
class TrainBatch:
    """Scored responses to learn from; list i of every field describes sample i.

    Sample i is `prompt_ids[i] + response_ids[i]`: the prompt is everything before the policy's first
    token, the response everything from there on, and `loss_masks[i]` marks which response tokens the
    policy generated (tool results or user turns between policy segments are 0)."""

    prompt_ids: list[list[int]]
    """Tokens before the first policy token (non-empty)."""
    response_ids: list[list[int]]
    """Tokens from the first policy token on."""
    advantages: list[float]
    """One advantage per sample."""
    domain_ids: list[str]
    """Domain of each sample (for per-domain metrics)."""
    old_logprobs: list[list[float]] | None = None
    """Per response token, log-probabilities under the sampling policy; None -> computed before the
    first epoch."""
    sample_weights: list[float] | None = None
    """Per-sample loss weights (e.g. `posttrain.algo.weights_from_coefficients`); None -> all 1."""
    loss_masks: list[list[int]] | None = None
    """Per response token, 1 where the policy generated it; None -> every response token."""

    @classmethod
    def from_trajectories(
        cls,
        trajectories: Sequence[Trajectory],
        advantages: Sequence[float],
        sample_weights: Sequence[float] | None = None,
        old_logprobs: bool = True,
    ) -> TrainBatch:
        """The batch of `trajectories`; `old_logprobs=False` leaves them to be recomputed."""
        cuts = [t.prompt_length for t in trajectories]
        masks = [list(t.loss_mask[c:]) for t, c in zip(trajectories, cuts, strict=True)]
        return cls(
            prompt_ids=[list(t.token_ids[:c]) for t, c in zip(trajectories, cuts, strict=True)],
            response_ids=[list(t.token_ids[c:]) for t, c in zip(trajectories, cuts, strict=True)],
            advantages=list(advantages),
            domain_ids=[t.task.domain_id for t in trajectories],
            old_logprobs=[list(t.logprobs[c:]) for t, c in zip(trajectories, cuts, strict=True)]
            if old_logprobs else None,
            sample_weights=list(sample_weights) if sample_weights is not None else None,
            loss_masks=None if all(all(m) for m in masks) else masks,
        )

    def __len__(self) -> int:
        return len(self.prompt_ids)

    def num_loss_tokens(self, index: int) -> int:
        """Tokens of sample `index` the loss is computed on."""
        return sum(self.loss_masks[index]) if self.loss_masks is not None else len(self.response_ids[index])

    def validate(self) -> None:
        """Raise ValueError on mismatched lengths."""
        size = len(self.prompt_ids)
        fields: dict[str, Sequence[Any]] = {
            "response_ids": self.response_ids,
            "advantages": self.advantages,
            "domain_ids": self.domain_ids,
        }
        per_token: dict[str, Sequence[Sequence[Any]] | None] = {
            "old_logprobs": self.old_logprobs, "loss_masks": self.loss_masks,
        }
        if self.sample_weights is not None:
            fields["sample_weights"] = self.sample_weights
        fields.update({name: rows for name, rows in per_token.items() if rows is not None})
        for name, values in fields.items():
            if len(values) != size:
                raise ValueError(f"TrainBatch.{name} has {len(values)} entries, prompt_ids has {size}")
        for name, rows in per_token.items():
            for i, (row, resp) in enumerate(zip(rows or [], self.response_ids, strict=False)):
                if len(row) != len(resp):
                    label = name.replace("_", " ")
                    raise ValueError(f"sample {i}: {len(row)} {label} for {len(resp)} response tokens")


def wrap_lora(model: nn.Module, config: LoraConfig, seed: int) -> nn.Module:
    """`model` with fresh LoRA adapters (initialised from `seed`); only adapter weights train."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    targets = config.target_modules if isinstance(config.target_modules, str) else list(config.target_modules)
    peft_config = PeftLoraConfig(
        r=config.r, lora_alpha=config.alpha, lora_dropout=config.dropout, target_modules=targets,
        task_type="CAUSAL_LM",
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return get_peft_model(model, peft_config)  # type: ignore[arg-type]


class PolicyTrainer:
    """Updates a causal LM policy from `TrainBatch`es; see the module docstring."""

    def __init__(self, model: nn.Module, config: PolicyConfig, ref_model: nn.Module | None = None,
                 parallel: DataParallel | None = None) -> None:  # fmt: skip
        self.config = config
        self.parallel = parallel
        """This rank's place in a data-parallel learner group; None: the whole batch here."""
        self.model: nn.Module = wrap_lora(model, config.lora, config.seed) if config.lora else model
        self.device = next(self.model.parameters()).device
        if config.gradient_checkpointing:
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})  # type: ignore[operator]
        self.ref_model = self._reference(model, ref_model)
        self._params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self._params,
            lr=config.lr,
            betas=config.betas,
            eps=config.adam_eps,
            weight_decay=config.weight_decay,
        )
        self.lr_schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: lr_multiplier(s, config))
        self.step_count = 0
        self._entropy_sums: dict[str, float] = defaultdict(float)  # per domain, over the current step
        self._mismatch: list[float] | None = None  # learner vs sampler logprob gap, first optimizer step
        self._measuring = False
        self._last_lr = config.lr * lr_multiplier(0, config)
        forward = inspect.signature(_base_model(self.model).forward).parameters
        self._can_keep_logits = "logits_to_keep" in forward

    @property
    def causal_lm(self) -> nn.Module:
        """The transformers model itself (under LoRA: with the adapters injected in place), for engines."""
        return _base_model(self.model)

    def policy_state(self) -> dict[str, Tensor]:
        """The rollout engine's weights: `causal_lm`'s state dict (views, not copies)."""
        return dict(self.causal_lm.state_dict())

    @property
    def _needs_reference(self) -> bool:
        return self.config.loss.kl_beta > 0 or self.config.track_kl_to_base

    def _reference(self, model: nn.Module, ref_model: nn.Module | None) -> nn.Module | None:
        if not self._needs_reference:
            return None
        if ref_model is None and self.config.lora is not None:
            return None  # the adapter-free base model is the reference
        ref = ref_model if ref_model is not None else copy.deepcopy(model)
        ref.eval().requires_grad_(False)
        return ref

    # ----------------------------------------------------------------------------- log-probabilities

    def logprobs(
        self, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]]
    ) -> list[list[float]]:
        """Teacher-forced log-probabilities of each response token under the current policy."""
        return self._logprobs_of(self.model, prompt_ids, response_ids)

    def reference_logprobs(
        self, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]]
    ) -> list[list[float]]:
        """The same under the reference policy (the base model without adapters under LoRA)."""
        if self.ref_model is not None:
            return self._logprobs_of(self.ref_model, prompt_ids, response_ids)
        with self._adapters_disabled():
            return self._logprobs_of(self.model, prompt_ids, response_ids)

    @torch.no_grad()
    def _logprobs_of(
        self, model: nn.Module, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]]
    ) -> list[list[float]]:
        was_training = model.training
        model.eval()
        out: dict[int, list[float]] = {}
        for rows in self._own(self._micro_batches(prompt_ids, range(len(prompt_ids)))):
            pairs = pad_pairs([prompt_ids[i] for i in rows], [response_ids[i] for i in rows])
            logprobs, _ = self._forward(model, pairs, entropy_grad=None)
            for i, values in zip(rows, unpad(logprobs, [len(response_ids[i]) for i in rows]), strict=True):
                out[i] = values
        model.train(was_training)
        if self.parallel is not None:  # same micro-batches as one process: the same values, bit for bit
            out = self.parallel.gather_rows(out)
        return [out[i] for i in range(len(prompt_ids))]

    def _own(self, micro: list[list[int]]) -> list[list[int]]:
        """The micro-batches this rank computes."""
        return micro if self.parallel is None else self.parallel.share(micro)

    def _micro_batches(self, prompt_ids: Sequence[Sequence[int]], rows: range) -> list[list[int]]:
        return micro_batches(prompt_ids, rows, self.config.micro_batch_size, self.config.shared_prefix_min_tokens)

    def _forward(
        self, model: nn.Module, pairs: PaddedPairs, entropy_grad: bool | None
    ) -> tuple[Tensor, Tensor | None]:
        """Response-token log-probabilities `[B, R]` and, unless `entropy_grad` is None, entropy `[B, R]`."""
        logits = self._kept_logits(model, pairs)  # [B, K, V]
        if self.config.temperature != 1.0:
            logits = logits / self.config.temperature
        index = pairs.response_index.to(self.device)  # [B, R]
        chunk = self.config.logits_chunk_size
        logprobs = token_logprobs(logits, pairs.kept_targets().to(self.device), chunk).gather(1, index)
        if entropy_grad is None:
            return logprobs, None
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = entropy_from_logits(logits, chunk).gather(1, index)  # [B, R]
        return logprobs, entropy

    def _kept_logits(self, model: nn.Module, pairs: PaddedPairs) -> Tensor:
        """Logits `[B, K, V]` from `pairs.first_kept` on; a prompt prefix shared by every row (a GRPO
        group, sibling questions on one document) of at least `shared_prefix_min_tokens` is computed once."""
        input_ids = pairs.input_ids.to(self.device)
        attention_mask = pairs.attention_mask.to(self.device)
        keep = pairs.num_kept if self._can_keep_logits else None
        min_tokens = self.config.shared_prefix_min_tokens
        shared = 0
        if min_tokens is not None and input_ids.shape[0] > 1:
            shared = common_prefix_len(input_ids, attention_mask, limit=pairs.first_kept)
        with self._autocast():
            if min_tokens is not None and shared >= min_tokens:
                starts = (group_starts(input_ids, shared, (pairs.first_kept + pairs.response_index[:, 0]).tolist())
                          if keep is not None and cascades(model) else None)  # fmt: skip
                if starts is not None:  # a group's question after the document: once per group too
                    return grouped_prefix_forward(model, input_ids, attention_mask, shared, starts, pairs.first_kept)
                logits = shared_prefix_forward(model, input_ids, attention_mask, shared, keep)
                return logits if keep is not None else logits[:, pairs.first_kept - shared :]
            kwargs: dict[str, Any] = {"logits_to_keep": keep} if keep is not None else {}
            output = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **kwargs)
        return output.logits if keep is not None else output.logits[:, pairs.first_kept :]

    def _autocast(self) -> AbstractContextManager[Any]:
        if self.config.autocast and self.device.type == "cuda":
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return nullcontext()

    @contextmanager
    def _adapters_disabled(self) -> Iterator[None]:
        with self.model.disable_adapter():  # type: ignore[operator]
            yield

    # ----------------------------------------------------------------------------------- the update

    def step(self, batch: TrainBatch) -> dict[str, float]:
        """Run all epochs over `batch`; returns mean metrics over its optimizer steps and the update's
        wall time (`time/learn_s`)."""
        start = time.perf_counter()
        batch.validate()
        if len(batch) == 0:
            raise ValueError("empty TrainBatch")
        old = batch.old_logprobs or self.logprobs(batch.prompt_ids, batch.response_ids)
        ref = self.reference_logprobs(batch.prompt_ids, batch.response_ids) if self._needs_reference else None
        weights = batch.sample_weights or [1.0] * len(batch)
        totals: dict[str, float] = defaultdict(float)
        domain_sums: dict[str, float] = defaultdict(float)
        domain_counts: dict[str, int] = defaultdict(int)
        self._entropy_sums = defaultdict(float)
        self._mismatch = [0.0, 0.0, 0.0] if batch.old_logprobs is not None else None  # sum |diff|, max, tokens
        self._measuring = self._mismatch is not None
        was_training = self.model.training
        self.model.train()
        parts = chunks(len(batch), math.ceil(len(batch) / self.config.mini_batches))
        for _ in range(self.config.epochs):
            for part in parts:
                metrics, sample_losses = self._optimizer_step(batch, part, old, ref, weights)
                for key, value in metrics.items():
                    totals[key] += value
                for domain, loss in zip(batch.domain_ids[part], sample_losses, strict=True):
                    domain_sums[domain] += loss
                    domain_counts[domain] += 1
        self.model.train(was_training)
        self.step_count += 1
        mismatch = self._mismatch
        if self.parallel is not None:
            self._entropy_sums = defaultdict(float, self.parallel.merge_sums(self._entropy_sums))
            if mismatch is not None:
                parts_seen = self.parallel.gather(mismatch)
                mismatch = [sum(m[0] for m in parts_seen), max(m[1] for m in parts_seen), sum(m[2] for m in parts_seen)]
        num_updates = self.config.epochs * len(parts)
        result = {key: value / num_updates for key, value in totals.items()}
        result["lr"] = self._last_lr
        result.update({f"loss/{d}": domain_sums[d] / domain_counts[d] for d in sorted(domain_sums)})
        result.update({f"entropy/{d}": self._entropy_sums[d] / domain_counts[d] for d in sorted(domain_sums)})
        if ref is not None:
            result.update(kl_to_base(batch, old, ref))
        if mismatch is not None and mismatch[2] > 0:
            result["logprob_mismatch"] = mismatch[0] / mismatch[2]
            result["logprob_mismatch_max"] = mismatch[1]
        result["time/learn_s"] = time.perf_counter() - start
        return result

    def _optimizer_step(
        self,
        batch: TrainBatch,
        part: slice,
        old: list[list[float]],
        ref: list[list[float]] | None,
        weights: list[float],
    ) -> tuple[dict[str, float], list[float]]:
        """One optimizer step over `batch[part]`, accumulated over micro-batches."""
        responses = batch.response_ids[part]
        lengths = [batch.num_loss_tokens(i) for i in range(part.start, part.stop)]
        loss_config = self.config.loss
        norm = Normalizer(
            num_seqs=float(len(responses)),
            num_tokens=float(max(sum(lengths), 1)),
            seq_len_norm=float(loss_config.norm_num_tokens or max(max(lengths), 1)),
        )
        self.optimizer.zero_grad(set_to_none=True)
        totals: dict[str, float] = defaultdict(float)
        sample_losses: dict[int, float] = {}
        for rows in self._own(self._micro_batches(batch.prompt_ids, range(part.start, part.stop))):
            pairs = pad_pairs([batch.prompt_ids[i] for i in rows], [batch.response_ids[i] for i in rows])
            logprobs, entropy = self._forward(self.model, pairs, entropy_grad=loss_config.entropy_coef > 0)
            width = pairs.response_mask.shape[1]
            mask = pairs.response_mask
            if batch.loss_masks is not None:
                mask = mask * pad_floats([batch.loss_masks[i] for i in rows], width)
            out = policy_loss(
                logprobs,
                pad_floats([old[i] for i in rows], width).to(self.device),
                torch.tensor([batch.advantages[i] for i in rows], device=self.device),
                mask.to(self.device),
                loss_config,
                ref_logprobs=pad_floats([ref[i] for i in rows], width).to(self.device) if ref else None,
                entropy=entropy,
                sample_weights=torch.tensor([weights[i] for i in rows], device=self.device),
                normalizer=norm,
            )
            if self._measuring:
                self._measure_mismatch(logprobs.detach(), pad_floats([old[i] for i in rows], width), mask)
            out.loss.backward()
            for key in ("loss", "pg_loss", "kl", "entropy", "clip_fraction", "kl_old"):
                totals[key] += float(getattr(out, key).item())
            sample_losses.update(zip(rows, out.sample_losses.tolist(), strict=True))
            if entropy is not None:  # per-sample token-mean entropy, summed per domain for the step's report
                token_mask = mask.to(entropy.device)
                per_sample = (entropy.detach() * token_mask).sum(1) / token_mask.sum(1).clamp(min=1.0)
                for i, value in zip(rows, per_sample.tolist(), strict=True):
                    self._entropy_sums[batch.domain_ids[i]] += value
        self._measuring = False  # measured on the first optimizer step only: later ones run updated weights
        if self.parallel is not None:  # every rank then clips and steps on the same summed gradient
            self.parallel.sum_gradients(self._params)
            totals = defaultdict(float, self.parallel.merge_sums(totals))
            sample_losses = self.parallel.gather_rows(sample_losses)
        totals["grad_norm"] = self._clip_gradients()
        self._last_lr = float(self.optimizer.param_groups[0]["lr"])
        self.optimizer.step()
        self.lr_schedule.step()
        return totals, [sample_losses[i] for i in range(part.start, part.stop)]

    def _measure_mismatch(self, logprobs: torch.Tensor, sampled: torch.Tensor, mask: torch.Tensor) -> None:
        """Accumulate |learner - sampler| logprob over loss tokens (before any update of this step: the
        sampler's logprobs should equal the learner's; a gap is an off-policy error, e.g. retokenization)."""
        assert self._mismatch is not None
        token_mask = mask.to(logprobs.device) > 0
        diff = (logprobs.float() - sampled.to(logprobs.device)).abs()[token_mask]
        if diff.numel():
            self._mismatch[0] += float(diff.sum().item())
            self._mismatch[1] = max(self._mismatch[1], float(diff.max().item()))
            self._mismatch[2] += float(diff.numel())

    def _clip_gradients(self) -> float:
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm is not None else math.inf
        return float(torch.nn.utils.clip_grad_norm_(self._params, max_norm).item())

    # ---------------------------------------------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        """A snapshot (copies, not views) of everything exact resume needs."""
        return {
            "model": {k: v.detach().to("cpu", copy=True) for k, v in self._weights().items()},
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
            "lr_schedule": self.lr_schedule.state_dict(),
            "step": self.step_count,
            "rng": capture_rng(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a `state_dict()` snapshot into this trainer (same model and config)."""
        if self.config.lora is not None:
            from peft import set_peft_model_state_dict

            set_peft_model_state_dict(self.model, state["model"])
        else:
            self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.lr_schedule.load_state_dict(state["lr_schedule"])
        self.step_count = int(state["step"])
        self._last_lr = float(self.optimizer.param_groups[0]["lr"])
        restore_rng(state["rng"])

    def _weights(self) -> dict[str, Tensor]:
        if self.config.lora is not None:
            from peft import get_peft_model_state_dict

            return dict(get_peft_model_state_dict(self.model))
        return dict(self.model.state_dict())


def kl_to_base(batch: TrainBatch, logprobs: list[list[float]], ref: list[list[float]]) -> dict[str, float]:
    """Token-mean k3 KL of the sampling policy to the reference, per sample, averaged overall
    (`kl_base`) and per domain (`kl_base/<domain>`), over loss tokens only."""
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for i, (lp, rp) in enumerate(zip(logprobs, ref, strict=True)):
        mask = batch.loss_masks[i] if batch.loss_masks is not None else [1.0] * len(lp)
        tokens = [(r - p, m) for p, r, m in zip(lp, rp, mask, strict=True) if m > 0]
        value = sum(math.exp(d) - d - 1.0 for d, _ in tokens) / max(len(tokens), 1)
        sums[batch.domain_ids[i]] += value
        counts[batch.domain_ids[i]] += 1
    result = {"kl_base": sum(sums.values()) / max(sum(counts.values()), 1)}
    result.update({f"kl_base/{d}": sums[d] / counts[d] for d in sorted(sums)})
    return result


def _base_model(model: nn.Module) -> nn.Module:
    """The transformers model under a peft wrapper (or the model itself)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model
