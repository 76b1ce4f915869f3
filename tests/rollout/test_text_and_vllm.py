"""Text helpers over a tiny local tokenizer with a chat template; the vLLM adapter (GPU only)."""

from __future__ import annotations

from typing import Any

import pytest

from posttrain.rollout import GenerationRequest, NativeEngine, SamplingParams
from posttrain.rollout.text import encode_prompt, generate_text
from posttrain.types import ChatMessage
from tests.rollout.conftest import tiny_model

TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} </s> {% endfor %}"
            "{% if add_generation_prompt %}<assistant> {% endif %}")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "</s>", "<user>", "<assistant>", "<system>", "hello", "world", "2+2?", "be", "brief"]
    raw = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>", eos_token="</s>")
    tok.chat_template = TEMPLATE
    return tok


def test_chat_prompt_uses_the_template(tokenizer: Any) -> None:
    messages = (ChatMessage(role="system", content="be brief"), ChatMessage(role="user", content="2+2?"))
    ids = encode_prompt(tokenizer, messages)
    assert tokenizer.decode(ids) == "<system> be brief </s> <user> 2+2? </s> <assistant>"


def test_plain_string_becomes_one_user_turn(tokenizer: Any) -> None:
    assert encode_prompt(tokenizer, "hello") == encode_prompt(tokenizer, [{"role": "user", "content": "hello"}])


def test_generate_text_returns_n_strings_per_prompt(tokenizer: Any) -> None:
    engine = NativeEngine(tiny_model("qwen2", vocab=16))
    texts = generate_text(engine, tokenizer, ["hello", "world"], SamplingParams(n=2, max_new_tokens=3, seed=0))
    assert [len(t) for t in texts] == [2, 2]
    assert all(isinstance(s, str) for t in texts for s in t)


@pytest.mark.gpu
def test_vllm_adapter_generates(tmp_path: Any) -> None:
    pytest.importorskip("vllm")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("vLLM needs CUDA")
    from posttrain.rollout.vllm_engine import VLLMEngine

    tiny_model("qwen2").save_pretrained(tmp_path)
    engine = VLLMEngine(str(tmp_path), gpu_memory_utilization=0.2)
    params = SamplingParams(n=2, max_new_tokens=4, seed=0)
    out = engine.generate([GenerationRequest(prompt_ids=[3, 4, 5], params=params)])
    assert len(out[0].samples) == 2
