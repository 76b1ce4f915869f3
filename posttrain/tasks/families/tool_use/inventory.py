"""Inventory family: items and orders in a small in-memory database (`agent/tools/inventory@<level>`).

easy: report an item's stock (1 call); medium: order some of the cheaper of two items and report the
total (item, item, order); hard: cancel an order, then order the cheapest of three items and report the
total (cancel, item x3, order). The state holds "stock <item>", "price <item>" and orders "o<n>" ->
"<qty> <item>"; ordering takes stock, cancelling gives it back. Distractor items: 3 / 5 / 7.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from posttrain.tasks.families.tool_use.common import ANSWER_FORMAT, FamilySpec, Generated, State, ToolError

ITEMS = ("lamp", "desk", "chair", "mug", "pen", "fan", "rug", "bag", "cup", "box", "sofa", "vase")
_NUM_ITEMS = {"easy": 4, "medium": 6, "hard": 8}


def tools(state: State) -> list[Callable[..., Any]]:
    def item(name: str) -> dict[str, Any]:
        """Look up an item's price and stock.

        Args:
            name: The item name.
        """
        if f"stock {name}" not in state:
            raise ToolError(f"no item {name!r}")
        return {"price": state[f"price {name}"], "stock": state[f"stock {name}"]}

    def order(name: str, qty: int) -> dict[str, Any]:
        """Order an item; returns the order id and total price.

        Args:
            name: The item name.
            qty: How many.
        """
        if f"stock {name}" not in state:
            raise ToolError(f"no item {name!r}")
        if not 0 < qty <= state[f"stock {name}"]:
            raise ToolError(f"qty must be 1 to {state[f'stock {name}']}")
        numbers = [int(k[1:]) for k in state if k.startswith("o") and k[1:].isdigit()]
        order_id = f"o{max(numbers, default=0) + 1}"
        state[order_id] = f"{qty} {name}"
        state[f"stock {name}"] -= qty
        return {"order": order_id, "total": qty * state[f"price {name}"]}

    def cancel_order(order_id: str) -> str:
        """Cancel an order and restock its items.

        Args:
            order_id: The order id, e.g. o1.
        """
        if order_id not in state:
            raise ToolError(f"no order {order_id!r}")
        qty, name = str(state.pop(order_id)).split(" ", 1)
        state[f"stock {name}"] += int(qty)
        return "ok"

    return [item, order, cancel_order]


def generate(rng: random.Random, level: str) -> Generated:
    names = rng.sample(ITEMS, _NUM_ITEMS[level])
    prices = rng.sample(range(3, 60), len(names))
    state: State = {}
    for name, price in zip(names, prices, strict=True):
        state[f"price {name}"], state[f"stock {name}"] = price, rng.randint(4, 20)
    if level == "easy":
        return Generated(f"How many '{names[0]}' are in stock? {ANSWER_FORMAT}", state,
                         [("item", {"name": names[0]})], str(state[f"stock {names[0]}"]))  # fmt: skip
    qty = rng.randint(2, 4)
    choices = names[:2] if level == "medium" else names[:3]
    cheapest = min(choices, key=lambda n: state[f"price {n}"])
    plan: list[tuple[str, dict[str, Any]]] = [("item", {"name": n}) for n in choices]
    plan.append(("order", {"name": cheapest, "qty": qty}))
    listed = " or ".join(f"'{n}'" for n in choices)
    prompt = f"Order {qty} of the cheapest of {listed}. Tell me the total. {ANSWER_FORMAT}"
    if level == "hard":
        for number in (1, 2):
            state[f"o{number}"] = f"1 {rng.choice(names[3:])}"
        drop = rng.choice(["o1", "o2"])
        plan.insert(0, ("cancel_order", {"order_id": drop}))
        prompt = f"Cancel order {drop}. Then order {qty} of the cheapest of {listed}. Tell me the total. {ANSWER_FORMAT}"
    return Generated(prompt, state, plan, str(qty * state[f"price {cheapest}"]))


SPEC = FamilySpec("inventory", "You manage a shop's inventory.", generate, tools)
