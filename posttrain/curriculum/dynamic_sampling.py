"""Dynamic sampling (DAPO-style): drop groups whose rewards are all equal and refill, within a budget.

A GRPO group whose rewards are all equal has zero advantage everywhere and contributes no gradient; with
hard (or too easy) data most groups can be like that. This module keeps the informative groups and asks
for more until the batch is full, but never loops forever and never raises because the data is too hard:
once the extra budget or the number of draw calls is spent, or `draw` returns nothing, it gives up and
returns what it has (padded with filtered groups by default, so the batch keeps its shape), saying so in
the report.

Call it like this (the trainer owns rollout and grading; this module only decides):

    kept, report = fill_informative_groups(groups, draw, num_groups=64, config=DynamicSamplingConfig())

    groups : Sequence[G]                    the groups already rolled out and graded
    draw   : Callable[[int], Sequence[G]]   rolls out and grades up to n *new* groups; may return fewer,
                                            an empty result means "no more data"; exceptions propagate
    G      : any object with `.rewards: Sequence[float]` (e.g. `posttrain.types.Group`), or pass `rewards_of=`
    kept   : list[G]                        exactly num_groups groups unless the report says gave_up
    report : FilterReport                   kept / dropped / padded / extra drawn / gave_up / fraction_filtered

Informative groups beyond `num_groups` (a refill overshoots by design) are returned in
`result.surplus` and counted in `report.num_surplus`; the trainer does not carry them into the next
step (they were sampled by this step's policy), so the count is the refill's waste.
Not here: advantage computation; the choice of which prompts to draw.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.types import rewards_differ

G = TypeVar("G")


class DynamicSamplingConfig(StrictModel):
    """Budget and policy of the refill loop."""

    enabled: bool = True
    """When False, every group is kept as is (the report still counts the all-equal ones)."""
    max_extra_fraction: float = Field(2.0, ge=0)
    """At most this many extra groups per requested group may be drawn."""
    max_draw_calls: int = Field(8, ge=0)
    """At most this many calls to `draw` per batch."""
    oversample: float = Field(1.25, ge=1)
    """Ask for the deficit divided by the observed keep rate, times this."""
    min_keep_rate: float = Field(0.05, gt=0, le=1)
    """Lower bound on the keep-rate estimate (limits the size of one request)."""
    reward_tolerance: float = Field(1e-6, ge=0)
    """Rewards closer than this count as equal."""
    on_shortfall: Literal["pad_with_filtered", "return_short"] = "pad_with_filtered"
    """After giving up: fill the batch with all-equal groups (shape kept, no gradient) or return fewer."""


@dataclass(frozen=True)
class FilterReport:
    """What the filter did for one batch."""

    num_requested: int
    num_kept: int
    """Informative groups returned."""
    num_padded: int
    """All-equal groups returned to keep the batch shape (only after giving up)."""
    num_dropped: int
    """All-equal groups seen (including any used as padding)."""
    num_extra_drawn: int
    """Groups obtained from `draw`."""
    num_draw_calls: int
    gave_up: bool
    """True when the batch could not be filled with informative groups within the budget."""
    fraction_filtered: float
    """num_dropped / groups examined (0 when nothing was examined)."""
    num_surplus: int = 0
    """Informative groups beyond the batch (returned in `FilterResult.surplus`)."""


@dataclass
class FilterResult(Generic[G]):
    kept: list[G]
    report: FilterReport
    surplus: list[G] = field(default_factory=list)

    def __iter__(self) -> Iterator[Any]:
        """`kept, report = fill_informative_groups(...)`."""
        return iter((self.kept, self.report))


def _default_rewards(group: Any) -> Sequence[float]:
    rewards: Sequence[float] = group.rewards
    return rewards


def fill_informative_groups(
    groups: Sequence[G],
    draw: Callable[[int], Sequence[G]],
    num_groups: int | None = None,
    config: DynamicSamplingConfig | None = None,
    rewards_of: Callable[[G], Sequence[float]] = _default_rewards,
) -> FilterResult[G]:
    """Keep informative groups, refilling through `draw` within the budget; see the module docstring."""
    cfg = config or DynamicSamplingConfig()
    target = len(groups) if num_groups is None else num_groups
    if not cfg.enabled:
        dropped = sum(not rewards_differ(rewards_of(g), cfg.reward_tolerance) for g in groups)
        report = FilterReport(target, len(groups), 0, dropped, 0, 0, False, dropped / max(len(groups), 1))
        return FilterResult(list(groups), report)
    kept: list[G] = []
    flat: list[G] = []
    examined = drawn = calls = 0

    def examine(batch: Sequence[G]) -> None:
        nonlocal examined
        for group in batch:
            examined += 1
            (kept if rewards_differ(rewards_of(group), cfg.reward_tolerance) else flat).append(group)

    examine(groups)
    budget = math.ceil(cfg.max_extra_fraction * target)
    gave_up = False
    while len(kept) < target:
        if calls >= cfg.max_draw_calls or drawn >= budget:
            gave_up = True
            break
        keep_rate = max(len(kept) / examined, cfg.min_keep_rate) if examined else 1.0
        request = min(budget - drawn, math.ceil((target - len(kept)) / keep_rate * cfg.oversample))
        new = list(draw(request))
        calls += 1
        if not new:
            gave_up = True
            break
        drawn += len(new)
        examine(new)
    surplus = kept[target:]
    kept = kept[:target]
    num_informative = len(kept)
    if len(kept) < target and cfg.on_shortfall == "pad_with_filtered":
        kept.extend(flat[: target - len(kept)])
    report = FilterReport(
        num_requested=target,
        num_kept=num_informative,
        num_padded=len(kept) - num_informative,
        num_dropped=len(flat),
        num_extra_drawn=drawn,
        num_draw_calls=calls,
        gave_up=gave_up,
        fraction_filtered=len(flat) / examined if examined else 0.0,
        num_surplus=len(surplus),
    )
    return FilterResult(kept, report, surplus)
