"""The one prompt renderer: a task's prompt to the token ids the policy sees, and its stop tokens.

One path for every model and every caller (training, evaluation, base-model building, benches): the
tokenizer's chat template (`apply_chat_template` with a generation prompt), with an optional system
message first. A tokenizer without a template gets the messages' contents joined by newlines plus a
final newline. The stop ids are the tokenizer's end-of-sequence id plus the end-of-turn tokens of
common instruct templates. Engines speak token ids only; this module sits at their edge.
Not here: loading tokenizers (pass any `transformers` tokenizer object).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from posttrain.types import Prompt, Task

END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|endoftext|>")
"""End-of-turn tokens of common chat templates (ChatML/Qwen/SmolLM2, Llama 3, GPT-style)."""


class PromptRenderer:
    """Renders prompts for one tokenizer and system prompt; decodes responses back to text."""

    def __init__(self, tokenizer: Any, system_prompt: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.stop_ids = stop_ids(tokenizer)

    def prompt_ids(self, prompt: Task | Prompt) -> list[int]:
        """Token ids of the prompt, ending where the model's answer starts."""
        messages = chat_messages(prompt, self.system_prompt)
        if getattr(self.tokenizer, "chat_template", None):
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
            return [int(i) for i in ids]
        text = "\n".join(m["content"] for m in messages) + "\n"
        return [int(i) for i in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def decode(self, token_ids: Sequence[int]) -> str:
        """A response's text, special tokens (the stop token among them) dropped."""
        return str(self.tokenizer.decode(list(token_ids), skip_special_tokens=True))


def chat_messages(prompt: Task | Prompt, system_prompt: str | None = None) -> list[dict[str, str]]:
    """The prompt as chat messages, with the system message first when one is given."""
    prompt = prompt.prompt if isinstance(prompt, Task) else prompt
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    else:
        messages = [m.model_dump() for m in prompt]
    if system_prompt and messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": system_prompt})
    return messages


def stop_ids(tokenizer: Any) -> tuple[int, ...]:
    """The tokenizer's end-of-sequence id and any end-of-turn token its vocabulary has."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    vocab = tokenizer.get_vocab()
    ids.update(vocab[token] for token in END_OF_TURN_TOKENS if token in vocab)
    return tuple(sorted(ids))
