"""The play-through PRNG of the gamedev engine: a seeded, portable random source that imports nothing.

`Rng(seed)` is splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
OOPSLA 2014): the same seed gives the same numbers on every Python, in the host and in the sandbox's
harness. It exists because the engine's sources are embedded in the trusted harness (see
`posttrain.verify.gamedev.play`), where importing `random` would cost milliseconds per response.
Guarantees: deterministic in the seed; `below(n)` is uniform up to a bias of n / 2**64. Not here:
cryptographic strength (the per-grading seed itself comes from `secrets` on the host).
"""

from __future__ import annotations

MASK64 = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15


class Rng:
    """splitmix64: `next64`, `below`, `between`, `uniform`, `choice`, `shuffle`."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    def next64(self) -> int:
        self.state = (self.state + GOLDEN_GAMMA) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """A number in [0, n)."""
        return self.next64() % n

    def between(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return low + self.below(high - low + 1)

    def uniform(self, low: float, high: float) -> float:
        """A float in [low, high)."""
        return low + (high - low) * ((self.next64() >> 11) / 9007199254740992.0)

    def choice(self, items: list[str] | tuple[str, ...] | str) -> str:
        return items[self.below(len(items))]

    def shuffle(self, items: list[tuple[int, int]]) -> None:
        """Fisher-Yates, in place."""
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]


def case_seed(seed: int, index: int) -> int:
    """The seed of the `index`-th random play-through of a grading seeded with `seed`."""
    return Rng(seed ^ ((index + 1) * GOLDEN_GAMMA)).next64()
