"""The one prompt renderer: a task's prompt to the token ids the policy sees, and its stop tokens.

One path for every model and every caller (training, evaluation, base-model building, benches): the
tokenizer's chat template (`apply_chat_template` with a generation prompt), with an optional system
message first. A tokenizer without a template gets the messages' contents joined by newlines plus a
final newline. The stop ids are the tokenizer's end-of-sequence id plus the end-of-turn tokens of
common instruct templates. Engines speak token ids only; this module sits at their edge.
Multi-turn episodes are token in, token out: `messages_ids` renders the opening messages once, and after
each assistant turn `delta_ids` tokenizes only what the template adds for the new messages (tool results,
the next user turn) and the next generation prompt, to be appended to the sampled tokens. The history is
never decoded and re-tokenized, so the learner trains on exactly the tokens the engine sampled and each
turn's prompt extends the previous one (which is what lets a prefix cache reuse it).
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
        self._parts: tuple[list[dict[str, str]], str, int] | None = None

    def prompt_ids(self, prompt: Task | Prompt) -> list[int]:
        """Token ids of the prompt, ending where the model's answer starts."""
        return self.messages_ids(chat_messages(prompt, self.system_prompt))

    def messages_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Token ids of chat messages (the system prompt already placed), ending with the generation prompt."""
        messages = [dict(m) for m in messages]
        if getattr(self.tokenizer, "chat_template", None):
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
            return [int(i) for i in ids]
        text = "\n".join(m["content"] for m in messages) + "\n"
        return [int(i) for i in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def delta_ids(self, messages: Sequence[dict[str, str]], closed: bool = True) -> list[int]:
        """Tokens to append after an assistant turn's sampled tokens so that `messages` follow it and the
        next assistant turn starts: the template's text after the end-of-turn token, the new messages,
        the generation prompt. `closed` is whether the turn ended with a stop token; when it did not
        (cut by length) the end-of-turn token is added first."""
        text = self._delta_text(tuple((m["role"], m["content"]) for m in messages))
        ids = self.encode_text(text)
        if not closed:
            ids = [self.end_of_turn_id, *ids]
        return ids

    @property
    def end_of_turn_id(self) -> int:
        """The token that closes an assistant turn in this template (what a cut turn is closed with)."""
        return self._template_parts()[2]

    def _delta_text(self, messages: tuple[tuple[str, str], ...]) -> str:
        probe, tail, _ = self._template_parts()
        new = [{"role": role, "content": content} for role, content in messages]
        if not getattr(self.tokenizer, "chat_template", None):
            return "".join(m["content"] + "\n" for m in new)
        before = self._render(probe, generation_prompt=False)
        after = self._render(probe + new, generation_prompt=True)
        if not after.startswith(before):
            raise ValueError("the chat template re-renders earlier turns when messages are added; "
                             "token-in/token-out multi-turn needs a template that only appends")
        return tail + after[len(before):]

    def _template_parts(self) -> tuple[list[dict[str, str]], str, int]:
        """(a probe conversation ending with an assistant turn, the template's text after that turn's
        end-of-turn token, the end-of-turn token id)."""
        if self._parts is None:
            probe = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
            if not getattr(self.tokenizer, "chat_template", None):
                self._parts = (probe, "", int(self.tokenizer.eos_token_id))
                return self._parts
            rendered = self._render(probe, generation_prompt=False)
            vocab = self.tokenizer.get_vocab()
            candidates = [t for t in (*END_OF_TURN_TOKENS, self.tokenizer.eos_token) if t and t in vocab]
            found = [(rendered.rfind(t), t) for t in candidates if rendered.rfind(t) >= 0]
            if not found:
                raise ValueError("cannot find the end-of-turn token in the chat template's assistant turn")
            position, token = max(found)
            self._parts = (probe, rendered[position + len(token):], int(vocab[token]))
        return self._parts

    def _render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        return str(self.tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt,
                                                      tokenize=False))  # fmt: skip

    def encode_text(self, text: str) -> list[int]:
        """Token ids of plain text (no special tokens added)."""
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
