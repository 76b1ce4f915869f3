"""Prompt rendering: a task's prompt to the token ids the policy sees.

One path for every model: the tokenizer's chat template (`apply_chat_template` with a generation
prompt). The embedded tiny base model ships a minimal template of its own, so it is rendered the same
way as a real instruct model. A model without any template gets `<prompt>\n` plus `answer_prefix`.
"""

from __future__ import annotations

from typing import Any

from posttrain.types import Task

TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'assistant' %}A: {{ message['content'] }}"
    "{{ eos_token }}{% else %}Q: {{ message['content'] }}\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}A: {% endif %}"
)
"""Q/A template of the embedded tiny model: `Q: <prompt>\nA: <answer><eos>`."""


def messages_of(task: Task, system_prompt: str | None = None) -> list[dict[str, str]]:
    """The task prompt as chat messages, with an optional system message first."""
    if isinstance(task.prompt, str):
        messages = [{"role": "user", "content": task.prompt}]
    else:
        messages = [m.model_dump() for m in task.prompt]
    if system_prompt and messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": system_prompt})
    return messages


def render_prompt_ids(tokenizer: Any, task: Task, system_prompt: str | None = None) -> list[int]:
    """Token ids of the task's prompt, ending where the model's answer starts."""
    messages = messages_of(task, system_prompt)
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        return [int(i) for i in ids]
    text = "\n".join(m["content"] for m in messages) + "\n"
    return [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]


def stop_ids(tokenizer: Any) -> tuple[int, ...]:
    """The tokenizer's end-of-sequence ids (an instruct model may end turns with another token)."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    vocab = tokenizer.get_vocab()
    ids.update(vocab[token] for token in ("<|im_end|>", "<|eot_id|>", "<|endoftext|>") if token in vocab)
    return tuple(sorted(ids))
