"""BFCL's AST-style grading of function calls, as pure functions over already-parsed calls.

Gold convention (`task.gold`, JSON): `{"functions": [BFCL function docs], "calls": [{"name": str,
"allowed": {param: [allowed values]}}]}` where each allowed-value list follows BFCL's `possible_answer`
files: an empty string `""` among a parameter's values means it may be omitted, a dict alternative maps
each key to its own list of allowed values, a list alternative is compared element by element.

Semantics (BFCL's, re-implemented): the function name is exact; every required parameter is present;
no parameter outside the function's schema or the answer; types by the schema (`integer`, `float`/
`number` — an int is accepted where a float is expected —, `string`/`any`, `boolean`, `array`/`tuple`,
`dict`/`object`; a bool is never a number); a value whose type is that of the allowed values instead
(BFCL's "variable" case, e.g. a name standing for a number) skips the schema type; strings compare
after lower-casing and dropping spaces and `,./-_*^` (so "April 1, 2024" matches "april 1 2024");
numbers compare exactly. Expectations: `one` — exactly one call, to the expected function; `parallel`
— the expected calls in any order, each matched by exactly one produced call (a bipartite matching,
so no greedy mismatch); `none` — no call at all (irrelevance). Guarantees: total (any input gives a
`Score`, never raises on model output), deterministic, details name the failed check per call.
`BfclAstVerifier` (config kind `bfcl_ast`) reads a response's calls with `posttrain.verify.tool_calls`
and grades them; an empty response fails everywhere (for irrelevance an empty reply would otherwise be a
free pass). Not here: loading BFCL data (`posttrain/tasks/families/bfcl.py`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from posttrain.types import Score, Task
from posttrain.verify.base import GoldError, guarded
from posttrain.verify.configs import BfclAstConfig
from posttrain.verify.tool_calls import ToolCall, parse_tool_calls

Expect = Literal["one", "parallel", "none"]
"""How many calls a category expects: exactly one, a set in any order, or none (irrelevance)."""

ProducedCall = tuple[str, dict[str, Any]] | str
"""A parsed call `(name, arguments)`, or the error text of a malformed `<tool_call>` block."""

_STRIP = re.compile(r"[ ,./\-_*^]")
_SCHEMA_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,), "float": (float, int), "number": (float, int), "string": (str,), "any": (str,),
    "boolean": (bool,), "array": (list,), "tuple": (list,), "dict": (dict,), "object": (dict,),
}
_DETAIL_CHARS = 200


@dataclass(frozen=True)
class CallCheck:
    """The verdict on one produced call: `check` is `ok` or the first check that failed."""

    check: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.check == "ok"

    def as_dict(self, index: int, name: str) -> dict[str, Any]:
        return {"index": index, "name": name[:_DETAIL_CHARS], "check": self.check, "detail": self.detail[:_DETAIL_CHARS]}


def standardize(text: str) -> str:
    """BFCL's string normal form: spaces and `,./-_*^` removed, lower case, single quotes as double."""
    return _STRIP.sub("", text).lower().replace("'", '"')


def _is_type(value: Any, types: tuple[type, ...]) -> bool:
    return type(value) in types  # exact: bool is not an int here


def value_matches(value: Any, allowed: Any) -> bool:
    """Whether `value` equals one allowed alternative, recursively (see the module docstring)."""
    if isinstance(allowed, dict):
        return isinstance(value, dict) and _dict_matches(value, allowed)
    if isinstance(allowed, list):
        return isinstance(value, list) and len(value) == len(allowed) and all(
            value_matches(v, a) for v, a in zip(value, allowed, strict=True))
    if isinstance(allowed, str):
        return isinstance(value, str) and standardize(value) == standardize(allowed)
    if isinstance(allowed, bool) or isinstance(value, bool):
        return type(value) is type(allowed) and value == allowed
    if isinstance(allowed, int | float):
        return _is_type(value, (int, float)) and value == allowed
    return bool(value is None and allowed is None)


def _alternatives(entry: Any) -> list[Any]:
    return entry if isinstance(entry, list) else [entry]


def _dict_matches(value: dict[str, Any], allowed: dict[str, Any]) -> bool:
    for key, item in value.items():
        if key not in allowed or not any(value_matches(item, a) for a in _alternatives(allowed[key])):
            return False
    return all(key in value or "" in _alternatives(options) for key, options in allowed.items())


def _type_ok(value: Any, schema: dict[str, Any], options: list[Any]) -> bool:
    types = _SCHEMA_TYPES.get(str(schema.get("type", "")))
    if types is None or _is_type(value, types):
        return True
    given = [o for o in options if o != ""]
    return bool(given) and type(value) is type(given[0])  # BFCL's "variable" case


def check_call(name: str, arguments: dict[str, Any], function: dict[str, Any], allowed: dict[str, Any]) -> CallCheck:
    """One produced call against one expected call (its function doc and allowed values)."""
    if name != function.get("name"):
        return CallCheck("name", f"expected {function.get('name')!r}, got {name!r}")
    params = function.get("parameters") or {}
    properties: dict[str, Any] = params.get("properties") or {}
    for param in params.get("required") or []:
        if param not in arguments:
            return CallCheck("required", f"missing required parameter {param!r}")
    for param, value in arguments.items():
        if param not in properties:
            return CallCheck("unknown_param", f"{param!r} is not a parameter of {name!r}")
        if param not in allowed:
            return CallCheck("unexpected_param", f"{param!r} should not be given here")
        options = _alternatives(allowed[param])
        if not _type_ok(value, properties[param] or {}, options):
            return CallCheck("type", f"{param!r}: {type(value).__name__} is not {properties[param].get('type')}")
        if not any(value_matches(value, option) for option in options if option != "" or value == ""):
            return CallCheck("value", f"{param!r}: {value!r} is not among {options!r}")
    for param, options in allowed.items():
        if param not in arguments and "" not in _alternatives(options):
            return CallCheck("missing_param", f"{param!r} must be given (it has no default in the answer)")
    return CallCheck("ok")


def _expected(gold: Any) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], dict[str, Any]]]]:
    if not isinstance(gold, dict) or not isinstance(gold.get("functions"), list) or not isinstance(gold.get("calls"), list):
        raise GoldError("BFCL gold must be {'functions': [...], 'calls': [...]}")
    docs = {f.get("name"): f for f in gold["functions"] if isinstance(f, dict)}
    pairs = []
    for call in gold["calls"]:
        if not isinstance(call, dict) or call.get("name") not in docs or not isinstance(call.get("allowed"), dict):
            raise GoldError(f"BFCL gold call {str(call)[:120]} names no offered function")
        pairs.append((docs[call["name"]], call["allowed"]))
    return gold["functions"], pairs


def _match(verdicts: list[list[CallCheck]]) -> list[int] | None:
    """A perfect matching expected -> produced over the `ok` verdicts (Kuhn's augmenting paths), or None."""
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j, verdict in enumerate(verdicts[i]):
            if verdict.ok and j not in seen:
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    if not all(assign(i, set()) for i in range(len(verdicts))):
        return None
    return [next(j for j, i in owner.items() if i == e) for e in range(len(verdicts))]


def _closest(row: list[CallCheck]) -> tuple[int, CallCheck]:
    """The produced call nearest to passing for one expected call: ok first, then a right name."""
    best = min(range(len(row)), key=lambda j: (not row[j].ok, row[j].check == "name", j))
    return best, row[best]


def grade_calls(calls: Sequence[ProducedCall], gold: Any, expect: Expect) -> Score:
    """Grade the produced calls of one response against a BFCL gold entry; raises only `GoldError`."""
    _, expected = _expected(gold)
    malformed = [(i, c) for i, c in enumerate(calls) if isinstance(c, str)]
    details: dict[str, Any] = {"expect": expect, "num_calls": len(calls), "num_expected": len(expected)}
    if expect == "none":
        if calls:
            return Score.wrong(message="a tool call was made where none fits", failed_check="call_made", **details)
        return Score.correct(**details)
    if malformed:
        rows = [{"index": i, "name": "", "check": "malformed", "detail": err[:_DETAIL_CHARS]} for i, err in malformed]
        return Score.wrong(message="malformed tool call", failed_check="malformed", calls=rows, **details)
    parsed = [c for c in calls if not isinstance(c, str)]
    if len(parsed) != len(expected):
        return Score.wrong(message=f"{len(parsed)} calls, expected {len(expected)}", failed_check="count", **details)
    verdicts = [[check_call(name, args, doc, allowed) for name, args in parsed] for doc, allowed in expected]
    matching = _match(verdicts)
    if matching is not None:
        rows = [verdicts[e][j].as_dict(j, parsed[j][0]) for e, j in enumerate(matching)]
        return Score.correct(calls=rows, **details)
    rows = []
    for e, row in enumerate(verdicts):
        j, verdict = _closest(row)
        rows.append({"expected": e, **verdict.as_dict(j, parsed[j][0])})
    failed = next((r["check"] for r in rows if r["check"] != "ok"), "matching")
    return Score.wrong(message=f"calls do not match the answer ({failed})", failed_check=failed, calls=rows, **details)



class BfclAstVerifier:
    """Grades a response's `<tool_call>` blocks against a BFCL task's gold with BFCL's AST semantics."""

    def __init__(self, config: BfclAstConfig) -> None:
        self.expect: Expect = config.expect

    @guarded
    def score(self, task: Task, response: str) -> Score:
        if not response.strip():  # abstaining by saying nothing would otherwise pass irrelevance
            return Score.wrong(message="empty response", failed_check="empty")
        calls: list[ProducedCall] = [
            (c.name, c.arguments) if isinstance(c, ToolCall) else c.error for c in parse_tool_calls(response)
        ]
        return grade_calls(calls, task.gold, self.expect)
