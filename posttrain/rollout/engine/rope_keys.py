"""Which RoPE frequencies a token's KV was computed with, as an integer key (plain Python).

Most RoPE variants (default, linear, yarn, llama3) use one set of frequencies for every position, so
KV computed anywhere can be reused anywhere. Two variants of `transformers` pick their frequencies from
the length of the sequence being computed (`dynamic_rope_update` in `modeling_rope_utils`):
dynamic NTK recomputes them for every length above `max_position_embeddings`, longrope switches from
its short to its long factors above `original_max_position_embeddings`.

The native engine computes a token exactly as `transformers`' incremental decoding does (a prompt in
one forward, then one token per step): the prompt's tokens with the frequencies of the prompt length,
and the token at position p generated later with those of length p + 1. So a token's frequencies are
a pure function of (prompt length, position) (`rope_length`), whatever the chunking, batching or
preemption. `RopeKeys` names each distinct set of frequencies by a key; the prefix cache keeps one
tree per key, so cached KV is only reused by a sequence that would compute the same values.
Not here: computing frequencies (`posttrain.rollout.engine.rope`).
"""

from __future__ import annotations

from dataclasses import dataclass

STATIC_KEY = 0
"""The key of the frequencies used up to the threshold (the only key of a static variant)."""


def rope_length(prompt_len: int, position: int) -> int:
    """The sequence length `transformers` computes the token at `position` with: the prompt's tokens
    are prefilled in one forward of `prompt_len` positions, every later token in its own step."""
    return max(prompt_len, position + 1)


@dataclass(frozen=True)
class RopeKeys:
    """Frequency keys of one model's RoPE variant.

    `threshold` None: one set of frequencies (every key is `STATIC_KEY`). Otherwise lengths up to
    `threshold` use the base set; above it, `per_length` True gives every length its own set (dynamic
    NTK: the key is the length), False one more set (longrope: key 1).
    """

    threshold: int | None = None
    per_length: bool = False

    @property
    def is_static(self) -> bool:
        return self.threshold is None

    def key(self, length: int) -> int:
        """Key of the frequencies for a sequence of `length` positions."""
        if self.threshold is None or length <= self.threshold:
            return STATIC_KEY
        return length if self.per_length else 1

    def prompt_key(self, prompt_len: int) -> int:
        """Key of a sequence's prompt tokens (the tree its prefix is looked up and cached in)."""
        return self.key(prompt_len)

    def cacheable(self, prompt_len: int, num_tokens: int) -> int:
        """How many of a sequence's first `num_tokens` tokens were computed with its prompt key.

        Prompt tokens all were; a later token at position p was computed with length p + 1, which has
        the prompt's key while both lengths are within the threshold, always for longrope above it,
        never for dynamic NTK above it.
        """
        if self.threshold is None:
            return num_tokens
        if prompt_len <= self.threshold:
            return min(num_tokens, self.threshold)
        return min(num_tokens, prompt_len) if self.per_length else num_tokens

    def length_of(self, key: int) -> int | None:
        """A length whose frequencies have `key`; None for `STATIC_KEY` (the frequencies at init)."""
        if key == STATIC_KEY or self.threshold is None:
            return None
        return key if self.per_length else self.threshold + 1
