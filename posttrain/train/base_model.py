"""The embedded tiny base model: a BPE tokenizer and a small Qwen2 trained by SFT on the train split.

`build_tiny_base` is deterministic for a given config and domain set: it trains a byte-level BPE
tokenizer (digits split individually, so arithmetic stays learnable) on rendered tasks, then fine-tunes
a randomly initialised Qwen2 on `Q: <prompt>\nA: <answer><eos>` with the loss on answer tokens only, and
stops as soon as the mean greedy pass rate over the domains reaches `stop_pass_rate` and every domain
reaches `min_domain_pass_rate` — leaving headroom for RL everywhere. The SFT mixture is rebalanced at each
evaluation towards the domains furthest below `mix_ceiling` (`sft_mixture`), so easy domains do not end
near 100% while hard ones stay near 0%, where a group of samples rarely holds a success to learn from.
The result is an ordinary HF directory (`save_pretrained`), cached by a hash of its inputs.
Not here: any real LLM (see `posttrain.train.models`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import random
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from posttrain.config import cache_root
from posttrain.envs.base import run_scripted
from posttrain.envs.runner import transcript_tokens
from posttrain.rollout.prompting import PromptRenderer
from posttrain.tasks.base import GOLD_TURNS
from posttrain.tasks.pool import TaskPool
from posttrain.train._policy_config import warmup_cosine
from posttrain.train._prefix import sft_loss_backward
from posttrain.train.config import SftConfig, TinyBaseConfig
from posttrain.train.models import weights_sha256
from posttrain.types import Task

BUILD_VERSION = 4
"""Bumped whenever the recipe changes, so stale cached models are not reused."""

BUILD_THREADS = 1
"""torch threads during the build: float sums then run in one order whatever the caller set, so the
`posttrain base build` command and a training run produce the same model on the same CPU."""


TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'assistant' %}A: {{ message['content'] }}"
    "{{ eos_token }}{% elif message['role'] == 'tool' %}T: {{ message['content'] }}\n"
    "{% elif message['role'] == 'system' %}S: {{ message['content'] }}\n"
    "{% else %}Q: {{ message['content'] }}\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}A: {% endif %}"
)
"""Q/A template of the embedded tiny model: `Q: <prompt>\nA: <answer><eos>` (system messages `S: `, tool
results `T: `), so it is prompted through the same chat-template path as a real instruct model."""


def cache_key(config: TinyBaseConfig, domain_ids: Sequence[str], data_seed: int, eval_fraction: float) -> str:
    """Hash of everything the build depends on (the split fraction decides which tasks SFT may see)."""
    blob = json.dumps(
        [BUILD_VERSION, config.model_dump(), sorted(domain_ids), data_seed, eval_fraction], sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def train_tokenizer(texts: Sequence[str], vocab_size: int) -> Any:
    """Byte-level BPE with individually split digits; `<pad>`=0, `<eos>`=1; Q/A chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<pad>", "<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>")
    fast.chat_template = TINY_CHAT_TEMPLATE
    return fast


def new_model(config: TinyBaseConfig, tokenizer: Any) -> Any:
    """A randomly initialised Qwen2 of the recipe's shape over the tokenizer's vocabulary."""
    from posttrain.train.models import TinyModelConfig, tiny_random

    assert (tokenizer.pad_token_id, tokenizer.eos_token_id) == (0, 1), "tiny_random's special ids"
    shape = config.model_dump(include={"hidden_size", "num_layers", "num_heads", "num_kv_heads",
                                       "intermediate_size", "seed"})
    return tiny_random(TinyModelConfig(vocab_size=len(tokenizer), max_positions=config.max_positions, **shape))


Transcript = Callable[[Task], "list[dict[str, str]] | None"]
"""An agent task's gold episode as messages (None for single-turn tasks)."""


def sft_batch(renderer: PromptRenderer, tasks: Sequence[Task], transcript: Transcript = lambda _t: None,
              max_tokens: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """Right-padded (input_ids, attention_mask, labels) with labels only on answer + eos tokens; an agent
    task's gold episode is laid out as the episode runner lays it out, labels on every assistant turn.
    Rows longer than `max_tokens` are cut."""
    tokenizer = renderer.tokenizer
    rows: list[tuple[list[int], list[int]]] = []
    for task in tasks:
        messages = transcript(task)
        if messages is not None:
            ids, loss_mask = transcript_tokens(renderer, messages)
            rows.append((ids, [t if m else -100 for t, m in zip(ids, loss_mask, strict=True)]))
            continue
        prompt = renderer.prompt_ids(task)
        answer = tokenizer(task.answer or "", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append((prompt + answer, [-100] * len(prompt) + answer))
    if max_tokens is not None:
        rows = [(ids[:max_tokens], labels[:max_tokens]) for ids, labels in rows]
    width = max(len(ids) for ids, _ in rows)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in rows])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
    mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in rows])
    return input_ids, mask, labels


def gold_transcript(pool: TaskPool) -> Transcript:
    """The gold episode of an agent task (its `gold_turns` run through a fresh environment)."""

    def transcript(task: Task) -> list[dict[str, str]] | None:
        env = pool.registry.environment(task.domain_id)
        turns = task.metadata.get(GOLD_TURNS)
        if env is None or not turns:
            return None
        return run_scripted(env, task, turns)[0]

    return transcript


def corpus_text(task: Task, transcript: Transcript) -> str:
    """The text a task contributes to the tokenizer's corpus (its gold episode for agent tasks)."""
    messages = transcript(task)
    if messages is None:
        return f"Q: {task.prompt_text()}\nA: {task.answer}"
    from jinja2 import Template

    return str(Template(TINY_CHAT_TEMPLATE).render(messages=messages, eos_token="", add_generation_prompt=False))


def sft_lr_multiplier(step: int, config: SftConfig) -> float:
    """Linear warm-up, then cosine decay to `min_lr_ratio` at `max_steps` (step is 0-based)."""
    return warmup_cosine(step, config.warmup_steps, config.max_steps, config.min_lr_ratio)


EvalFn = Callable[[Any, Any], dict[str, float]]
"""(model, tokenizer) -> greedy pass rate per domain of the build."""
Draw = Callable[[random.Random, int, dict[str, float]], list[Task]]
"""(rng, n, mixture) -> n train tasks, domains drawn by the mixture's weights."""


def sft_mixture(pass_rates: dict[str, float], ceiling: float, floor: float) -> dict[str, float]:
    """Sampling weights for the next SFT examples: floor + normalised gap below the ceiling, summing to 1.

    E.g. ceiling 0.6, floor 0.15: pass rates (0.0, 0.3, 0.9) -> raw (1.15, 0.65, 0.15) -> (0.59, 0.33, 0.08).
    """
    raw = {d: floor + max(ceiling - p, 0.0) / ceiling for d, p in pass_rates.items()}
    total = sum(raw.values())
    return {d: w / total for d, w in raw.items()}


def run_sft(
    config: SftConfig,
    model: Any,
    tokenizer: Any,
    draw: Draw,
    eval_fn: EvalFn,
    domain_ids: Sequence[str],
    log: Callable[[str], None] = print,
    transcript: Transcript = lambda _t: None,
    renderer: PromptRenderer | None = None,
) -> list[dict[str, Any]]:
    """SFT until the stopping rule holds (see the module docstring); returns the eval history. Prompts
    are rendered by `renderer` (default: the tokenizer's chat template, no system prompt)."""
    rng = random.Random(config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: sft_lr_multiplier(s, config))
    history: list[dict[str, Any]] = []
    mixture = {d: 1.0 / len(domain_ids) for d in domain_ids}
    renderer = renderer or PromptRenderer(tokenizer)
    start = time.perf_counter()
    for step in range(1, config.max_steps + 1):
        model.train()
        input_ids, mask, labels = sft_batch(renderer, draw(rng, config.batch_size, mixture), transcript,
                                            config.max_positions)  # fmt: skip
        if config.shared_prefix_min_tokens is None:
            loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
            loss.backward()
        else:  # long documents shared by sibling questions: each computed once per batch
            loss = torch.tensor(sft_loss_backward(model, input_ids, mask, labels, config.shared_prefix_min_tokens))
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        if step % config.eval_every == 0 or step == config.max_steps:
            rates = eval_fn(model, tokenizer)
            pass_rate, lowest = sum(rates.values()) / len(rates), min(rates.values())
            history.append({"step": step, "loss": loss.item(), "pass_rate": pass_rate, "domains": rates})
            log(f"sft step {step}: loss {loss.item():.3f}, pass rate {pass_rate:.3f} (lowest domain "
                f"{lowest:.3f}), {time.perf_counter() - start:.0f} s")
            enough = pass_rate >= config.stop_pass_rate and lowest >= config.min_domain_pass_rate
            if step >= config.min_steps and enough:
                break
            mixture = sft_mixture(rates, config.mix_ceiling, config.mix_floor)
    return history


def build_tiny_base(
    config: TinyBaseConfig,
    pool: TaskPool,
    domain_ids: Sequence[str],
    eval_fn: EvalFn,
    out_dir: Path,
    log: Callable[[str], None] = print,
) -> Path:
    """Train tokenizer and model, save both (plus `build.json`) to `out_dir` atomically."""
    threads = torch.get_num_threads()
    torch.set_num_threads(BUILD_THREADS)
    try:
        return _build(config, pool, domain_ids, eval_fn, out_dir, log)
    finally:
        torch.set_num_threads(threads)


def _build(
    config: TinyBaseConfig,
    pool: TaskPool,
    domain_ids: Sequence[str],
    eval_fn: EvalFn,
    out_dir: Path,
    log: Callable[[str], None],
) -> Path:
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    draw = task_drawer(pool)
    uniform = {d: 1.0 for d in domain_ids}
    transcript = gold_transcript(pool)
    corpus = [corpus_text(t, transcript) for t in draw(rng, config.tokenizer_corpus, uniform)]
    tokenizer = train_tokenizer(corpus, config.vocab_size)
    model = new_model(config, tokenizer)
    history = run_sft(config, model, tokenizer, draw, eval_fn, domain_ids, log, transcript)
    meta = {"config": config.model_dump(), "domains": list(domain_ids), "history": history}
    return save_model_dir(model, tokenizer, out_dir, "build.json", meta)


def save_model_dir(model: Any, tokenizer: Any, out_dir: Path, marker: str, meta: dict[str, Any]) -> Path:
    """Save model, tokenizer and `meta` (plus the weights' hash) as `out_dir/marker`, atomically: written
    beside it, then renamed, so a directory holding `marker` is always complete."""
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / marker).write_text(json.dumps({**meta, "weights_sha256": weights_sha256(model)}, indent=2))
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return out_dir


def cached_build(out_dir: Path, marker: str, what: str, build: Callable[[], Path],
                 log: Callable[[str], None]) -> Path:  # fmt: skip
    """`out_dir` when it holds `marker`, else `build()` under a file lock beside it: runs started together
    (the seeds of `bench learning`) build it once, the others wait and reuse it."""
    if (out_dir / marker).is_file():
        log(f"using cached {what} {out_dir}")
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(out_dir.with_name(out_dir.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out_dir / marker).is_file():
            log(f"using {what} {out_dir}, built by another run meanwhile")
            return out_dir
        return build()


def task_drawer(pool: TaskPool, one_domain_per_batch: bool = False) -> Draw:
    """Train tasks drawn by a mixture: domains chosen by weight, tasks sharing a context (questions on one
    document) in whole contexts after the others. With `one_domain_per_batch` one domain is chosen for
    the whole batch (a shared-context domain then gives one document's questions, computed once)."""

    def draw(r: random.Random, n: int, mixture: dict[str, float]) -> list[Task]:
        names = list(mixture)
        chosen = r.choices(names, weights=[mixture[d] for d in names], k=1 if one_domain_per_batch else n)
        chosen = chosen * n if one_domain_per_batch else chosen
        shared = {d: chosen.count(d) for d in names if pool.registry.get(d).spec.context_size is not None}
        tasks = [pool.sample(d, 1, "train", r)[0] for d in chosen if d not in shared]
        return tasks + [t for d, count in shared.items() if count for t in pool.sample(d, count, "train", r)]

    return draw


def ensure_tiny_base(config: TinyBaseConfig, domains: Any, log: Callable[[str], None] = print) -> Path:
    """The cached tiny base model for these domains, built first if missing."""
    pool = TaskPool.from_config(domains)
    domain_ids = pool.registry.ids()
    out_dir = cache_root() / f"tiny-{cache_key(config, domain_ids, domains.seed, domains.eval_fraction)}"

    def build() -> Path:
        log(f"building the tiny base model for {len(domain_ids)} domains -> {out_dir}")
        return build_tiny_base(config, pool, domain_ids, greedy_pass_rate(pool, domain_ids, config), out_dir, log)

    return cached_build(out_dir, "build.json", "tiny base model", build, log)


def greedy_pass_rate(pool: TaskPool, domain_ids: Sequence[str], config: SftConfig,
                     system_prompt: str | None = None) -> EvalFn:  # fmt: skip
    """The stopping rule's evaluation: greedy pass rate per domain on the eval split."""
    from posttrain.eval.evaluate import evaluate
    from posttrain.rollout import NativeEngine
    from posttrain.verify import ExecutorConfig

    grader = pool.registry.grader(ExecutorConfig(num_workers=0))  # inline: nothing to close

    def pass_rate(model: Any, tokenizer: Any) -> dict[str, float]:
        model.eval()
        renderer = PromptRenderer(tokenizer, system_prompt)
        result = evaluate(NativeEngine(model), renderer, pool, domain_ids, grader.grade, config.eval_tasks_per_domain,
                          max_new_tokens=config.eval_max_new_tokens, max_total_tokens=config.max_positions)  # fmt: skip
        return {d: r.pass_rate for d, r in result.items()}

    return pass_rate
