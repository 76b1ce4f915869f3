"""The prompt renderer over a tiny local tokenizer; weight sync by state dict; the vLLM adapter (GPU)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from posttrain.rollout import (
    GenerationRequest,
    HFEngine,
    NativeEngine,
    PromptRenderer,
    SamplingParams,
    VLLMEngineConfig,
    build_engine,
)
from posttrain.rollout.weights import load_weights
from posttrain.types import ChatMessage, Task
from tests.rollout.conftest import prompt, tiny_model

TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} </s> {% endfor %}"
            "{% if add_generation_prompt %}<assistant> {% endif %}")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "</s>", "<user>", "<assistant>", "<system>", "hello", "world", "2+2?", "be", "brief",
             "<|im_end|>"]
    raw = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>", eos_token="</s>")
    tok.chat_template = TEMPLATE
    return tok


def test_chat_prompt_uses_the_template(tokenizer: Any) -> None:
    messages = (ChatMessage(role="system", content="be brief"), ChatMessage(role="user", content="2+2?"))
    ids = PromptRenderer(tokenizer).prompt_ids(messages)
    assert tokenizer.decode(ids) == "<system> be brief </s> <user> 2+2? </s> <assistant>"


def test_system_prompt_goes_first_once(tokenizer: Any) -> None:
    task = Task(id="t#0", domain_id="a/b/c", prompt="hello")
    with_system = PromptRenderer(tokenizer, system_prompt="be brief").prompt_ids(task)
    assert tokenizer.decode(with_system) == "<system> be brief </s> <user> hello </s> <assistant>"
    chat = (ChatMessage(role="system", content="world"), ChatMessage(role="user", content="hello"))
    assert tokenizer.decode(PromptRenderer(tokenizer, "be brief").prompt_ids(chat)).startswith("<system> world")


def test_plain_string_task_and_one_user_turn_render_alike(tokenizer: Any) -> None:
    renderer = PromptRenderer(tokenizer)
    task = Task(id="t#0", domain_id="a/b/c", prompt="hello")
    assert renderer.prompt_ids("hello") == renderer.prompt_ids(task) == renderer.prompt_ids(
        (ChatMessage(role="user", content="hello"),))


def test_stop_ids_hold_eos_and_known_end_of_turn_tokens(tokenizer: Any) -> None:
    vocab = tokenizer.get_vocab()
    assert PromptRenderer(tokenizer).stop_ids == tuple(sorted({vocab["</s>"], vocab["<|im_end|>"]}))


def test_no_template_joins_contents_with_newlines(tokenizer: Any) -> None:
    plain = copy.deepcopy(tokenizer)
    plain.chat_template = None
    ids = PromptRenderer(plain, system_prompt="be brief").prompt_ids("hello")
    assert ids == plain("be brief\nhello\n", add_special_tokens=False)["input_ids"]


def _greedy(engine: Any, ids: list[int]) -> list[int]:
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    return list(engine.generate([GenerationRequest(prompt_ids=ids, params=params)])[0].samples[0].token_ids)


@pytest.mark.parametrize("engine_class", [NativeEngine, HFEngine])
def test_state_dict_sync_into_a_separate_copy_equals_the_shared_module(engine_class: Any) -> None:
    learner = tiny_model("qwen2", seed=0)
    remote = engine_class(copy.deepcopy(learner))  # an engine holding its own weights, as in another process
    shared = engine_class(learner)
    with torch.no_grad():
        for param in learner.parameters():
            param.add_(torch.randn_like(param) * 0.5)  # an update done in place by the learner
    ids = prompt(12)
    assert _greedy(remote, ids) != _greedy(shared, ids)  # the copy has not seen the update yet
    remote.update_weights(learner.state_dict(), version=1)
    shared.update_weights(learner.state_dict(), version=1)
    assert _greedy(remote, ids) == _greedy(shared, ids)


def test_sync_of_shared_tensors_copies_nothing_and_of_others_copies_all() -> None:
    learner = tiny_model("qwen2", seed=0)
    assert load_weights(learner, learner.state_dict()) == 0
    other = copy.deepcopy(learner)
    assert load_weights(other, learner.state_dict()) == len(learner.state_dict())


def test_sync_refuses_mismatched_names() -> None:
    learner = tiny_model("qwen2", seed=0)
    state = dict(learner.state_dict())
    state.pop("lm_head.weight")
    with pytest.raises(KeyError, match="missing"):
        load_weights(copy.deepcopy(learner), state)


def test_vllm_engine_needs_a_model_directory() -> None:
    with pytest.raises(ValueError, match="directory"):
        build_engine(VLLMEngineConfig(), tiny_model("qwen2"))


@pytest.mark.gpu
def test_vllm_adapter_generates(tmp_path: Any) -> None:
    pytest.importorskip("vllm")
    if not torch.cuda.is_available():
        pytest.skip("vLLM needs CUDA")

    tiny_model("qwen2").save_pretrained(tmp_path)
    engine = build_engine(VLLMEngineConfig(llm_kwargs={"gpu_memory_utilization": 0.2}), None, str(tmp_path))
    params = SamplingParams(n=2, max_new_tokens=4, seed=0)
    out = engine.generate([GenerationRequest(prompt_ids=[3, 4, 5], params=params)])
    assert len(out[0].samples) == 2
