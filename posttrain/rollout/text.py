"""Text in, text out: turn task prompts into token ids with a tokenizer's chat template, and back.

Engines speak token ids only; these helpers sit at the edge. A chat prompt (a sequence of messages)
is rendered by the tokenizer's chat template (or `chat_template` when given) with the generation
prompt appended; a plain string is wrapped as one user message when the tokenizer has a template,
else encoded as is. Decoding drops the stop token when asked. Not here: tokenizer loading policy
(pass any `transformers` tokenizer object).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from posttrain.rollout.api import GenerationRequest, RequestOutput, RolloutEngine, SamplingParams
from posttrain.types import ChatMessage, Prompt

Message = ChatMessage | Mapping[str, str]


def _as_dict(message: Message) -> dict[str, str]:
    if isinstance(message, ChatMessage):
        return {"role": message.role, "content": message.content}
    return {"role": message["role"], "content": message["content"]}


def encode_prompt(tokenizer: Any, prompt: Prompt | Sequence[Message], chat_template: str | None = None,
                  add_generation_prompt: bool = True) -> list[int]:
    """Token ids of a plain or chat prompt (see module docstring for when the template applies)."""
    template = chat_template or getattr(tokenizer, "chat_template", None)
    if isinstance(prompt, str):
        if template is None:
            return list(tokenizer.encode(prompt, add_special_tokens=True))
        messages: list[dict[str, str]] = [{"role": "user", "content": prompt}]
    else:
        messages = [_as_dict(m) for m in prompt]
    text = tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False,
                                         add_generation_prompt=add_generation_prompt)
    return list(tokenizer.encode(text, add_special_tokens=False))


def decode_output(tokenizer: Any, output: RequestOutput, skip_special_tokens: bool = True) -> list[str]:
    """The text of each sample of one request."""
    return [tokenizer.decode(s.token_ids, skip_special_tokens=skip_special_tokens) for s in output.samples]


def generate_text(engine: RolloutEngine, tokenizer: Any, prompts: Sequence[Prompt | Sequence[Message]],
                  params: SamplingParams, chat_template: str | None = None) -> list[list[str]]:
    """Encode, generate, decode: `n` completions (as text) per prompt."""
    requests = [GenerationRequest(prompt_ids=encode_prompt(tokenizer, p, chat_template), params=params)
                for p in prompts]
    return [decode_output(tokenizer, out) for out in engine.generate(requests)]
