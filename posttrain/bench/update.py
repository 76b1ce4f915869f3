"""The policy update on long shared prompts: padded forward vs the shared-prefix forward.

`python bench/update.py [--json] [--out DIR] [--prompt-tokens N] [--documents D] [--questions Q]
[--group G] [--rounds R]`: D documents of N random tokens, Q questions on each, G responses per
question (a GRPO group), the workload of knowledge domains. For each round, on fresh copies of one tiny
Qwen2 (the shape of the embedded tiny base model) in one thread, times `PolicyTrainer.logprobs` (the
old-policy pass) and `PolicyTrainer.step` with `shared_prefix_min_tokens` off (the baseline: every row
recomputes its document) and on, interleaved; figures are medians in seconds and the ratio
baseline / shared. A third variant, `repeated`, shares the prefix the way models outside the cascade's
families do (the prefix cache copied to every row), so `cascade_speedup_step` is what the cascade
attention adds; a fourth, `ungrouped`, is the cascade without its group level (each row recomputes its
question), so `group_speedup_step` is what computing a group's question once adds. JSON in
`DIR/update.json` (default `bench/results`).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any
from unittest.mock import patch

import torch

from posttrain.bench.report import emit_report
from posttrain.train import _prefix
from posttrain.train import policy as policy_module
from posttrain.train.models import TinyModelConfig, tiny_random
from posttrain.train.policy import PolicyConfig, PolicyTrainer, TrainBatch

MODEL = TinyModelConfig(vocab_size=1024, hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2,
                        intermediate_size=384, max_positions=40_000)  # fmt: skip
RESPONSE_TOKENS = 40
QUESTION_TOKENS = 20


def workload(prompt_tokens: int, documents: int, questions: int, group: int) -> TrainBatch:
    rng = random.Random(0)
    prompts, responses = [], []
    for _ in range(documents):
        document = [rng.randrange(2, MODEL.vocab_size) for _ in range(prompt_tokens)]
        for _ in range(questions):
            question = [rng.randrange(2, MODEL.vocab_size) for _ in range(QUESTION_TOKENS)]
            for _ in range(group):
                prompts.append(document + question)
                responses.append([rng.randrange(2, MODEL.vocab_size) for _ in range(RESPONSE_TOKENS)])
    advantages = [rng.uniform(-1.0, 1.0) for _ in prompts]
    return TrainBatch(prompt_ids=prompts, response_ids=responses, advantages=advantages, domain_ids=["doc"] * len(prompts))


def _time_update(batch: TrainBatch, shared_min: int | None, micro_batch_size: int,
                 cascade: bool = True, grouped: bool = True) -> dict[str, float]:  # fmt: skip
    if not cascade:
        with patch.object(_prefix, "cascades", lambda _model: False):
            return _time_update(batch, shared_min, micro_batch_size)
    if not grouped:
        with patch.object(policy_module, "group_starts", lambda *_args: None):
            return _time_update(batch, shared_min, micro_batch_size)
    trainer = PolicyTrainer(tiny_random(MODEL), PolicyConfig(micro_batch_size=micro_batch_size,
                                                             shared_prefix_min_tokens=shared_min))  # fmt: skip
    start = time.perf_counter()
    old = trainer.logprobs(batch.prompt_ids, batch.response_ids)
    middle = time.perf_counter()
    step = TrainBatch(prompt_ids=batch.prompt_ids, response_ids=batch.response_ids, advantages=batch.advantages,
                      domain_ids=batch.domain_ids, old_logprobs=old)  # fmt: skip
    trainer.step(step)
    return {"logprobs_s": middle - start, "step_s": time.perf_counter() - middle}


def measure(prompt_tokens: int, documents: int, questions: int, group: int, rounds: int) -> dict[str, Any]:
    batch = workload(prompt_tokens, documents, questions, group)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs: dict[str, list[dict[str, float]]] = {"padded": [], "shared": [], "repeated": [], "ungrouped": []}
        for _ in range(rounds):
            runs["padded"].append(_time_update(batch, None, questions * group))
            runs["shared"].append(_time_update(batch, 256, questions * group))
            runs["repeated"].append(_time_update(batch, 256, questions * group, cascade=False))
            runs["ungrouped"].append(_time_update(batch, 256, questions * group, grouped=False))
    finally:
        torch.set_num_threads(threads)
    medians = {name: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for name, rs in runs.items()}
    return {
        "workload": {"prompt_tokens": prompt_tokens, "documents": documents, "questions": questions,
                     "group": group, "rows": len(batch), "response_tokens": RESPONSE_TOKENS},  # fmt: skip
        "model": MODEL.model_dump(),
        "rounds": rounds,
        "p50_s": {name: {k: round(v, 3) for k, v in m.items()} for name, m in medians.items()},
        "speedup_logprobs": round(medians["padded"]["logprobs_s"] / medians["shared"]["logprobs_s"], 2),
        "speedup_step": round(medians["padded"]["step_s"] / medians["shared"]["step_s"], 2),
        "cascade_speedup_logprobs": round(medians["repeated"]["logprobs_s"] / medians["shared"]["logprobs_s"], 2),
        "cascade_speedup_step": round(medians["repeated"]["step_s"] / medians["shared"]["step_s"], 2),
        "group_speedup_logprobs": round(medians["ungrouped"]["logprobs_s"] / medians["shared"]["logprobs_s"], 2),
        "group_speedup_step": round(medians["ungrouped"]["step_s"] / medians["shared"]["step_s"], 2),
    }


def _show(report: dict[str, Any]) -> None:
    w = report["workload"]
    print(f"policy update, {w['rows']} rows = {w['documents']} documents x {w['questions']} questions x "
          f"group {w['group']}, {w['prompt_tokens']}-token documents ({report['rounds']} rounds, medians)")  # fmt: skip
    for name, figures in report["p50_s"].items():
        print(f"  {name:9s} logprobs {figures['logprobs_s']:7.2f} s   step {figures['step_s']:7.2f} s")
    print(f"  shared prefix: {report['speedup_logprobs']}x faster logprobs, {report['speedup_step']}x faster step")
    print(f"  cascade vs repeated prefix cache: {report['cascade_speedup_logprobs']}x logprobs, "
          f"{report['cascade_speedup_step']}x step")
    print(f"  group level (each question once per group): {report['group_speedup_logprobs']}x logprobs, "
          f"{report['group_speedup_step']}x step")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="posttrain bench update", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--out", default="bench/results", help="folder for update.json")
    parser.add_argument("--prompt-tokens", type=int, default=3000, help="tokens per document")
    parser.add_argument("--documents", type=int, default=2, help="documents in the batch")
    parser.add_argument("--questions", type=int, default=8, help="questions per document")
    parser.add_argument("--group", type=int, default=2, help="responses per question")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (medians reported)")
    args = parser.parse_args(argv)
    report = measure(args.prompt_tokens, args.documents, args.questions, args.group, args.rounds)
    emit_report(report, args.out, "update.json", args.json, _show)
    return 0
