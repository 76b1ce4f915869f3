"""The rollout benchmark's W7: a GRPO step on real text, as a new user would first try the engines.

W7 samples `group` completions of each of `prompts` prompts of `prompt_tokens` tokens of English
text (windows of one fixed passage, so no two prompts share a prefix), at temperature 1 with no
top-k/top-p, `new_tokens` each and no stop token (every engine generates exactly the same number of
tokens). Three runs, alternated for `rounds` rounds in one process, each on a fresh engine (no prefix
cache carried over): `native` (`NativeEngine` with its defaults), `B0` (`HFEngine`:
`generate(num_return_sequences=group)` per prompt, returning logits and logprobs) and `generate` (plain
`model.generate(..., num_return_sequences=group)` per prompt, token ids only, what a new user would
call). Ratios are of the medians of wall time (the target) and, alongside, of process CPU time (all
threads), which moves less when other processes share the cores. The text is tokenized by the model's own tokenizer when its directory
has one (SmolLM2), else its UTF-8 bytes are the token ids (the random-weight models).
Not here: correctness (the engines' tests); the text's content does not matter to the cost.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from posttrain.rollout.api import GenerationRequest, SamplingParams
from posttrain.rollout.engine.engine import NativeEngine
from posttrain.rollout.hf_engine import HFEngine

PASSAGE = (
    "The harbour town wakes before the sun. Long before the first ferry sounds its horn, the bakers on "
    "Quay Street have lit their ovens, and the smell of rye and caraway drifts down to the water where "
    "the fishing boats are coming in. The crews sort their catch on the wet stones: mackerel into one "
    "crate, cod into another, the odd crab thrown back with a curse and a grin. A gull watches from the "
    "harbour master's roof, waiting for a mistake. By seven the market hall is open. Farmers from the "
    "valley unload potatoes, onions and late apples; a cheesemaker arranges wheels of hard cheese on a "
    "board; an old man sells honey from his own hives and tells anyone who stops that the heather was "
    "good this year. Children on their way to school cut through the hall because it is warm and because "
    "the woman at the bread stall sometimes hands out broken biscuits. The town council meets on "
    "Thursdays in a room above the post office. This week the agenda has three items: the repair of the "
    "sea wall after the autumn storms, a request to extend the summer bus service to the lighthouse, "
    "and a complaint about bicycles on the promenade. The sea wall will take most of the evening. The "
    "engineer's report says the foundations are sound but that the upper courses of stone have shifted, "
    "and that a section near the lifeboat station should be rebuilt before the spring tides. The "
    "treasurer has already warned that the reserve fund will not cover it, so the council will have to "
    "choose between raising the harbour dues, which the fishermen oppose, and applying for a regional "
    "grant, which would delay the work by at least a year. In the library, meanwhile, a retired teacher "
    "is cataloguing a box of letters found in the attic of the old customs house. They were written in "
    "the eighteen-sixties by a clerk who recorded every ship that entered the harbour, its cargo, its "
    "master and the weather, and who filled the margins with notes about his neighbours, his garden and "
    "his long argument with the vicar about the church clock, which was always four minutes fast."
)
"""Prose written for this benchmark (428 SmolLM2 tokens); prompts are windows of it."""

BYTE_OFFSET = 3
"""Models without a tokenizer read UTF-8 bytes as token ids `3 + byte` (ids 0-2 stay free)."""


def text_encoder(model: Any) -> Callable[[str], list[int]]:
    """The model's own tokenizer when its directory has one, else UTF-8 bytes as ids below its vocabulary."""
    directory = Path(str(getattr(model, "name_or_path", "") or ""))
    if (directory / "tokenizer.json").is_file():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        return lambda text: list(tokenizer.encode(text, add_special_tokens=False))
    vocab = int(model.config.vocab_size)
    return lambda text: [BYTE_OFFSET + b % (vocab - BYTE_OFFSET) for b in text.encode("utf-8")]


def text_prompts(encode: Callable[[str], list[int]], num_prompts: int, prompt_tokens: int) -> list[list[int]]:
    """`num_prompts` windows of `prompt_tokens` tokens of the passage, starting at different tokens."""
    ids = encode(PASSAGE)
    while len(ids) < prompt_tokens + num_prompts:
        ids = ids + ids
    stride = max(1, (len(ids) - prompt_tokens) // max(1, num_prompts))
    return [ids[i * stride : i * stride + prompt_tokens] for i in range(num_prompts)]


def plain_generate(model: Any, prompts: list[list[int]], group: int, new_tokens: int) -> int:
    """`model.generate` per prompt, `group` samples, no stop token; returns the number of new tokens."""
    generated = 0
    for seed, prompt in enumerate(prompts):
        torch.manual_seed(seed)
        ids = torch.tensor([prompt])  # [1, P]
        with torch.no_grad():
            out = model.generate(ids, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                 max_new_tokens=new_tokens, num_return_sequences=group,
                                 eos_token_id=[], pad_token_id=0)  # [group, P + new]
        generated += int(out.shape[0] * (out.shape[1] - ids.shape[1]))
    return generated


def w7_text_group(model: Any, s: Any) -> dict[str, Any]:
    """W7 (see module docstring): medians over alternating rounds, ratios and load averages."""
    prompts = text_prompts(text_encoder(model), s.w7_prompts, s.w7_prompt_tokens)
    params = [SamplingParams(n=s.w7_group, max_new_tokens=s.w7_new_tokens, temperature=1.0, seed=i)
              for i in range(len(prompts))]
    requests = [GenerationRequest(prompt_ids=p, params=q) for p, q in zip(prompts, params, strict=True)]

    def engine_run(make: Callable[[], Any]) -> Callable[[], int]:
        def run() -> int:
            engine = make()
            outputs = engine.generate(requests)
            return sum(len(sample.token_ids) for output in outputs for sample in output.samples)
        return run

    runs: dict[str, Callable[[], int]] = {
        "native": engine_run(lambda: NativeEngine(model)),
        "B0": engine_run(lambda: HFEngine(model)),
        "generate": lambda: plain_generate(model, prompts, s.w7_group, s.w7_new_tokens),
    }
    expected = len(prompts) * s.w7_group * s.w7_new_tokens
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    loads = [os.getloadavg()[0]]
    for _ in range(s.w7_rounds):
        for name, run in runs.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            generated = run()
            walls[name].append(time.perf_counter() - start)
            cpus[name].append(time.process_time() - start_cpu)
            if generated != expected:
                raise RuntimeError(f"W7 {name} generated {generated} tokens, expected {expected}")
        loads.append(os.getloadavg()[0])
    result: dict[str, Any] = {"prompt_tokens": [len(p) for p in prompts], "generated_tokens": expected,
                              "load_avg_1m": loads}
    for name, times in walls.items():
        median = statistics.median(times)
        result[name] = {"wall_s": median, "wall_s_rounds": times, "tokens_per_s": expected / median,
                        "cpu_s": statistics.median(cpus[name]), "cpu_s_rounds": cpus[name]}
    for base in ("B0", "generate"):
        result[f"speedup_vs_{base}"] = result[base]["wall_s"] / result["native"]["wall_s"]
        result[f"cpu_ratio_vs_{base}"] = result[base]["cpu_s"] / result["native"]["cpu_s"]
    return result
