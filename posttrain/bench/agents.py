"""`posttrain bench agents`: the asyncio episode runner against a lockstep baseline, in one run.

Workload: `--episodes` (64) concurrent episodes of `--turns` (8) assistant turns; every assistant message
gets a tool result of `--result-words` (100) words after the tool sleeps `--tool-ms` (50 ms); every
episode opens with the same system prompt of `--system-words` (400) words (the tool schemas of a real
agent prompt) and its own user message; at most `--new-tokens` (24) tokens per turn. Both sides use the same model, tokenizer,
seeds and sampling, so they generate the same tokens; only the scheduling differs:
- runner: `posttrain.envs.runner.EpisodeRunner` over a native engine with prefix caching: episodes
  waiting on tools never stall the others, and each turn's prompt reuses the episode's cached prefix;
- lockstep: every turn is one `generate` call over all live episodes on a native engine without prefix
  caching (the whole history is recomputed each turn), then all tools run in parallel threads and the
  next turn waits for the slowest.
Also measured: single-turn prompts through `engine.generate` against the same prompts played as one-step
episodes through the runner (what a single-turn domain would pay for going through the runner).
Reported: episodes/s of each side and their ratio (target >= 3x), the runner's prefix-cache hit rate
(cached / prompt tokens), new prompt tokens per turn. Model: a random-weight Qwen2 (`--model small`, about
6M parameters) over a byte-level BPE tokenizer with a ChatML template, built here; or the offline
SmolLM2-135M (`--model smollm2`). Writes `DIR/agents.json`.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from posttrain.bench.report import emit_report

TARGET = 3.0
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
WORDS = ("the tool returned a value of", "status ok with items", "record found for the query", "temperature",
         "inventory count", "next page token", "error none", "latency ms")


def words(count: int, offset: int) -> str:
    """`count` words of filler text (the byte-level tokenizer below makes most of them one token)."""
    return " ".join(WORDS[(offset + k) % len(WORDS)].split()[0] for k in range(count))


class SleepyEnv:
    """`turns` assistant turns; each message gets a tool result of about `result_words` words after
    `sleep_s` (a stand-in for a real tool). The system message (tool schemas in a real episode) is the
    same for every episode, about `system_words` words."""

    def __init__(self, index: int, turns: int, sleep_s: float, system_words: int = 0, result_words: int = 0) -> None:
        self.index, self.turns, self.sleep_s, self.count = index, turns, sleep_s, 0
        self.reason: str | None = None
        self.system_words, self.result_words = system_words, result_words

    def reset(self, task: Any) -> Any:
        from posttrain.envs.base import Observation

        self.count = 0
        return Observation([{"role": "system", "content": "You can call tools. " + words(self.system_words, 0)},
                            {"role": "user", "content": f"Task {self.index}: look up {WORDS[(self.index + 3) % 8]}."}])

    def step(self, message: str) -> Any:
        from posttrain.envs.base import StepResult

        time.sleep(self.sleep_s)
        self.count += 1
        done = self.count >= self.turns
        self.reason = "completed" if done else None
        content = f"result {self.count}: {words(self.result_words, self.index + self.count)} {self.index * 7 + self.count}"
        return StepResult([{"role": "tool", "content": content}], done, self.reason)

    def end(self, reason: str) -> None:
        self.reason = self.reason or reason

    def grade(self) -> Any:
        from posttrain.types import Score

        return Score(reward=1.0, passed=True, details={"turns": self.count, "end_reason": self.reason})


def chatml_tokenizer(corpus: Sequence[str] = (), vocab_size: int = 1024) -> Any:
    """A byte-level BPE tokenizer with ChatML special tokens and template, fitted on `corpus` (default:
    this benchmark's words)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    raw.train_from_iterator(list(corpus) or [" ".join(WORDS) + " user assistant tool system result task look up"] * 8,
                            trainer)  # fmt: skip
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|endoftext|>", pad_token="<pad>")
    tok.chat_template = CHATML
    return tok


def build(model_name: str) -> tuple[Any, Any]:
    import torch

    if model_name == "smollm2":
        from posttrain.train.config import ModelConfig
        from posttrain.train.models import load_model

        return load_model(ModelConfig(preset="smollm2-135m"))
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = chatml_tokenizer()
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=256, intermediate_size=688, num_hidden_layers=5,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                         tie_word_embeddings=True)
    return Qwen2ForCausalLM(config).eval(), tokenizer


def run_async(model: Any, renderer: Any, params: Any, args: argparse.Namespace) -> dict[str, Any]:
    from posttrain.envs.runner import EpisodeJob, EpisodeRunner
    from posttrain.rollout import NativeEngine
    from posttrain.rollout.config import NativeEngineConfig
    from posttrain.types import Task

    engine = NativeEngine(model, NativeEngineConfig(kv_cache_tokens=args.kv_tokens))
    runner = EpisodeRunner(engine, renderer, params, max_total_tokens=args.kv_tokens, tool_threads=args.episodes)
    task = Task(id="bench/agents/sleepy#0", domain_id="bench/agents/sleepy", prompt="-")
    jobs = [EpisodeJob(task, SleepyEnv(i, args.turns, args.tool_ms / 1000, args.system_words, args.result_words), i, seed=1000 + i)
            for i in range(args.episodes)]  # fmt: skip
    start = time.perf_counter()
    results = runner.run(jobs)
    wall = time.perf_counter() - start
    stats, counters = engine.stats(), runner.counters
    return {"wall_s": wall, "episodes_per_s": len(results) / wall,
            "generated_tokens": counters["generated_tokens"], "turns": counters["turns"],
            "prompt_tokens": counters["prompt_tokens"], "new_prompt_tokens": counters["new_prompt_tokens"],
            "prefix_cache_hit_rate": stats["cached_tokens"] / max(stats["prompt_tokens"], 1),
            "new_prompt_tokens_per_turn": counters["new_prompt_tokens"] / max(counters["turns"], 1),
            "engine_steps": stats["steps"],
            "_tokens": [r.trajectory.token_ids for r in results]}  # fmt: skip


def run_lockstep(model: Any, renderer: Any, params: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Turn by turn over all live episodes: one generate call, then every tool, waiting for the slowest."""
    from posttrain.rollout import GenerationRequest, NativeEngine
    from posttrain.rollout.config import NativeEngineConfig
    from posttrain.types import Task

    engine = NativeEngine(model, NativeEngineConfig(kv_cache_tokens=args.kv_tokens, prefix_caching=False))
    task = Task(id="bench/agents/sleepy#0", domain_id="bench/agents/sleepy", prompt="-")
    envs = [SleepyEnv(i, args.turns, args.tool_ms / 1000, args.system_words, args.result_words) for i in range(args.episodes)]
    start = time.perf_counter()
    histories = [renderer.messages_ids(env.reset(task).messages) for env in envs]
    live, generated, turn = list(range(len(envs))), 0, 0
    with ThreadPoolExecutor(max_workers=len(envs)) as pool:
        while live:
            requests = [GenerationRequest(prompt_ids=tuple(histories[i]), params=params.model_copy(
                update={"seed": (1000 + i + 7919 * turn) % 2**31})) for i in live]  # fmt: skip
            samples = [out.samples[0] for out in engine.generate(requests)]
            texts = [renderer.decode(s.token_ids) for s in samples]
            steps = list(pool.map(lambda env, text: env.step(text), [envs[i] for i in live], texts))  # the barrier
            still = []
            for i, sample, step in zip(live, samples, steps, strict=True):
                histories[i] += sample.token_ids
                generated += len(sample.token_ids)
                if not step.done:
                    histories[i] += renderer.delta_ids(step.messages, closed=sample.finish_reason == "stop")
                    still.append(i)
            live, turn = still, turn + 1
    wall = time.perf_counter() - start
    return {"wall_s": wall, "episodes_per_s": len(envs) / wall, "generated_tokens": generated,
            "computed_tokens": engine.stats()["computed_tokens"], "_tokens": [tuple(h) for h in histories]}


def single_turn(model: Any, renderer: Any, params: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The same single-turn prompts through `generate` and through the runner as one-step episodes."""
    from posttrain.envs.base import SingleTurnEnv
    from posttrain.envs.runner import EpisodeJob, EpisodeRunner
    from posttrain.rollout import GenerationRequest, NativeEngine
    from posttrain.rollout.config import NativeEngineConfig
    from posttrain.types import Score, Task

    tasks = [Task(id=f"bench/single/t#{i}", domain_id="bench/single/t", prompt=f"Task {i}: {WORDS[i % 8]}?")
             for i in range(args.episodes)]  # fmt: skip
    out: dict[str, Any] = {}
    for side in ("generate", "runner"):
        best = float("inf")
        for _ in range(3):
            engine = NativeEngine(model, NativeEngineConfig(kv_cache_tokens=args.kv_tokens))
            start = time.perf_counter()
            if side == "generate":
                engine.generate([GenerationRequest(prompt_ids=tuple(renderer.prompt_ids(t)),
                                                   params=params.model_copy(update={"seed": 1000 + i}))
                                 for i, t in enumerate(tasks)])  # fmt: skip
            else:
                runner = EpisodeRunner(engine, renderer, params, max_total_tokens=args.kv_tokens)
                runner.run([EpisodeJob(t, SingleTurnEnv(lambda _t, _r: Score.correct()), 0, seed=1000 + i)
                            for i, t in enumerate(tasks)])  # fmt: skip
            best = min(best, time.perf_counter() - start)
        out[f"{side}_s"] = best
    out["runner_over_generate"] = out["runner_s"] / out["generate_s"]
    return out


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from posttrain.rollout import PromptRenderer, SamplingParams

    torch.set_num_threads(args.threads)
    model, tokenizer = build(args.model)
    renderer = PromptRenderer(tokenizer)
    params = SamplingParams(max_new_tokens=args.new_tokens, temperature=1.0, stop_token_ids=renderer.stop_ids)
    lockstep = run_lockstep(model, renderer, params, args)
    runner = run_async(model, renderer, params, args)
    same = runner.pop("_tokens") == lockstep.pop("_tokens")
    speedup = runner["episodes_per_s"] / lockstep["episodes_per_s"]
    return {
        "benchmark": "agents", "model": args.model, "episodes": args.episodes, "turns": args.turns,
        "tool_ms": args.tool_ms, "new_tokens_per_turn": args.new_tokens, "system_words": args.system_words,
        "result_words": args.result_words, "threads": args.threads,
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__},
        "runner": runner, "lockstep": lockstep, "same_tokens": same,
        "speedup_vs_lockstep": speedup, "target": {"speedup >= 3x": {"value": speedup, "met": speedup >= TARGET}},
        "single_turn": single_turn(model, renderer, params, args),
    }  # fmt: skip


def show(report: dict[str, Any]) -> None:
    r, lock = report["runner"], report["lockstep"]
    print(f"{report['episodes']} episodes x {report['turns']} turns, tools {report['tool_ms']} ms, model {report['model']}")
    print(f"  runner   {r['episodes_per_s']:.2f} episodes/s ({r['wall_s']:.2f} s), prefix-cache hit rate "
          f"{r['prefix_cache_hit_rate']:.1%}, {r['new_prompt_tokens_per_turn']:.1f} new prompt tokens/turn")
    print(f"  lockstep {lock['episodes_per_s']:.2f} episodes/s ({lock['wall_s']:.2f} s)")
    print(f"  speedup  {report['speedup_vs_lockstep']:.2f}x (target >= {TARGET}x); same tokens: {report['same_tokens']}")
    single = report["single_turn"]
    print(f"  single-turn: runner / generate = {single['runner_over_generate']:.2f}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="posttrain bench agents", description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--tool-ms", type=float, default=50.0)
    parser.add_argument("--new-tokens", type=int, default=24, help="max new tokens per turn")
    parser.add_argument("--system-words", type=int, default=400, help="shared system prompt (tool schemas)")
    parser.add_argument("--result-words", type=int, default=100, help="words per tool result")
    parser.add_argument("--model", choices=["small", "smollm2"], default="small")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--kv-tokens", type=int, default=1 << 17)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    report = measure(args)
    emit_report(report, args.out, "agents.json", args.json, show)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
