"""Procedural function-writing tasks: one small function per task, from a catalogue of operations.

An `Op` is one kind of function: a one-line spec, the body of a correct solution, and an independent
reference implementation in Python that computes every expected value (so a wrong body or a wrong
reference shows up as a gold answer that fails its own tests). A `CodeFamilySpec` groups ops by level
with one argument type and its inputs. A task draws an op of its level, its constants and its inputs
from the task's RNG; its prompt is short (name, signature, spec, one or two examples: the tiny model has
512-1024 positions), its tests are at least `MIN_ASSERTS` asserts, the family's edge inputs first.

Guarantees: deterministic in the RNG; every expected value comes from the reference; test inputs are
distinct. Not here: which ops exist (`integers.py`, `strings.py`, `lists.py`) or running code.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from posttrain.tasks.families.code.gold import asserts_check, fenced, function_gold

MIN_ASSERTS = 6
"""Asserts per task, edge inputs included."""
NAMES = ("f", "g", "solve", "transform", "compute", "apply")
"""Function names a task may ask for (drawn per task, so the name must be read from the prompt)."""
_MAX_EXAMPLES = 2

Params = dict[str, Any]
DrawParams = Callable[[random.Random], Params]


def constant(low: int, high: int) -> DrawParams:
    """Draws one constant `k` in [low, high]."""
    return lambda rng: {"k": rng.randint(low, high)}


@dataclass(frozen=True)
class Op:
    """One kind of function: `spec` and `body` are formatted with the op's drawn constants."""

    spec: str
    """What the function returns, one line; `{k}`-style fields are the drawn constants."""
    body: str
    """A correct solution's body (one or more lines, unindented; `{arg}` is the argument's name)."""
    ref: Callable[[Params, Any], Any]
    """The reference: (constants, input) -> expected output, written independently of `body`."""
    returns: str
    """The return type annotation."""
    params: DrawParams = lambda _rng: {}
    """Draws the constants."""


@dataclass(frozen=True)
class CodeFamilySpec:
    """A family of ops over one argument type."""

    name: str
    """The family's domain name (`code/function/<name>@<level>`)."""
    arg: str
    """The argument's name in signatures and specs."""
    arg_type: str
    """Its type annotation."""
    levels: dict[str, Sequence[Op]]
    """The ops of each level."""
    edge_inputs: Sequence[Any]
    """Inputs every task is tested on (empty, zero, negative, ...)."""
    random_input: Callable[[random.Random, str], Any]
    """Draws one input for a level."""


@dataclass(frozen=True)
class CodeTask:
    """What a generated task is made of."""

    prompt: str
    gold: dict[str, Any]
    answer: str
    calls: list[tuple[str, Any]]
    """What the tests assert: (argument source, expected value), in order."""


def generate(spec: CodeFamilySpec, level: str, rng: random.Random) -> CodeTask:
    """One task of `spec` at `level`: an op, its constants, its inputs, then prompt, tests and answer."""
    op = rng.choice(list(spec.levels[level]))
    params = op.params(rng)
    name = rng.choice(NAMES)
    inputs = _inputs(spec, level, rng)
    results = [(repr(x), op.ref(params, x)) for x in inputs]
    examples = results[-_MAX_EXAMPLES:]  # random inputs come after the edge ones
    signature = f"{name}({spec.arg}: {spec.arg_type}) -> {op.returns}"
    spec_line = op.spec.format(arg=spec.arg, **params)
    shown = "\n".join(f"{name}({args}) == {value!r}" for args, value in examples)
    prompt = (f"Write a Python function `{signature}` that returns {spec_line}.\nExamples:\n{shown}\n"
              "Reply with the function in a ```python block.")  # fmt: skip
    body = op.body.format(arg=spec.arg, **params)
    code = f"def {signature}:\n" + "\n".join(f"    {line}" for line in body.splitlines())
    gold = function_gold(name, asserts_check(results))
    return CodeTask(prompt=prompt, gold=gold, answer=fenced(code), calls=results)


def _inputs(spec: CodeFamilySpec, level: str, rng: random.Random) -> list[Any]:
    """The edge inputs, then random distinct ones up to `MIN_ASSERTS` (at least two: the examples)."""
    inputs = list(spec.edge_inputs)
    wanted = max(MIN_ASSERTS, len(inputs) + _MAX_EXAMPLES)
    for _ in range(50 * wanted):
        if len(inputs) >= wanted:
            break
        x = spec.random_input(rng, level)
        if x not in inputs:
            inputs.append(x)
    return inputs
