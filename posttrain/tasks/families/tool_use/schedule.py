"""Calendar family: booking over a simulated calendar API (`agent/tools/calendar@<level>`).

Days mon-fri, one-hour slots starting 9-16. easy: book a free slot (1 call); medium: book at the
earliest free hour of a day (events, book); hard: move an event to the earliest free hour of another day
and book a new one in its old slot (events, cancel, events, book, book). Other days hold distractor
events. The state maps "day hour" (e.g. "mon 9") to the event title.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from posttrain.tasks.families.tool_use.common import FamilySpec, Generated, Plan, State, ToolError

DAYS = ("mon", "tue", "wed", "thu", "fri")
HOURS = tuple(range(9, 17))
TITLES = ("gym", "lunch", "call", "demo", "sync", "review", "standup", "dentist", "retro", "focus")
_NUM_EVENTS = {"easy": 3, "medium": 5, "hard": 8}


def slot(day: str, hour: int) -> str:
    return f"{day} {hour}"


def tools(state: State) -> list[Callable[..., Any]]:
    def events(day: str) -> list[str]:
        """List a day's events as 'hour title'.

        Args:
            day: mon, tue, wed, thu or fri.
        """
        if day not in DAYS:
            raise ToolError(f"unknown day {day!r}")
        return [f"{h} {state[slot(day, h)]}" for h in HOURS if slot(day, h) in state]

    def book(day: str, hour: int, title: str) -> str:
        """Book a one-hour event.

        Args:
            day: mon, tue, wed, thu or fri.
            hour: Start hour, 9 to 16.
            title: The event title.
        """
        if day not in DAYS or hour not in HOURS:
            raise ToolError("day must be mon-fri and hour 9-16")
        if slot(day, hour) in state:
            raise ToolError(f"{day} {hour} is busy")
        state[slot(day, hour)] = title
        return "ok"

    def cancel(day: str, hour: int) -> str:
        """Cancel the event at a day and hour.

        Args:
            day: mon, tue, wed, thu or fri.
            hour: Start hour.
        """
        if state.pop(slot(day, hour), None) is None:
            raise ToolError(f"no event at {day} {hour}")
        return "ok"

    return [events, book, cancel]


def _fill(rng: random.Random, state: State, days: list[str], count: int, titles: list[str]) -> None:
    free = [slot(d, h) for d in days for h in HOURS if slot(d, h) not in state]
    for key in rng.sample(free, count):
        state[key] = rng.choice(titles)


def _earliest_free(state: State, day: str) -> int:
    return next(h for h in HOURS if slot(day, h) not in state)


def generate(rng: random.Random, level: str) -> Generated:
    day, other = rng.sample(DAYS, 2)
    rest = [d for d in DAYS if d not in (day, other)]
    title, moved = rng.sample(TITLES, 2)
    fillers = [t for t in TITLES if t not in (title, moved)]
    state: State = {}
    if level == "easy":
        hour = rng.choice(HOURS)
        _fill(rng, state, [day, *rest], _NUM_EVENTS[level], fillers)
        state.pop(slot(day, hour), None)
        return Generated(f"Book '{title}' on {day} at {hour}.", state,
                         [("book", {"day": day, "hour": hour, "title": title})])  # fmt: skip
    for hour in HOURS[: rng.randint(1, 3)]:
        state[slot(other, hour)] = rng.choice(fillers)
    if level == "medium":
        _fill(rng, state, rest, _NUM_EVENTS[level], fillers)
        plan: Plan = [("events", {"day": other}), ("book", {"day": other, "hour": _earliest_free(state, other),
                                                      "title": title})]  # fmt: skip
        return Generated(f"Book '{title}' on {other} at the earliest free hour.", state, plan)
    old = rng.choice(HOURS)
    state[slot(day, old)] = moved
    _fill(rng, state, rest + [day], _NUM_EVENTS[level], fillers)
    new = _earliest_free(state, other)
    plan_hard: Plan = [("events", {"day": day}), ("cancel", {"day": day, "hour": old}), ("events", {"day": other}),
            ("book", {"day": other, "hour": new, "title": moved}),
            ("book", {"day": day, "hour": old, "title": title})]  # fmt: skip
    prompt = (f"Move '{moved}' from {day} to the earliest free hour on {other}, then book '{title}' in "
              f"its old slot on {day}.")  # fmt: skip
    return Generated(prompt, state, plan_hard)


SPEC = FamilySpec("calendar", "You manage the user's calendar.", generate, tools)
