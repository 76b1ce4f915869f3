"""JSON schemas for tools: derived from a Python function's type hints and docstring, and checked against.

`function_schema(fn)` writes the OpenAI/Qwen "function" shape, `{"type": "function", "function": {"name",
"description", "parameters": {"type": "object", "properties": {...}, "required": [...]}}}`, from the
signature: `str`, `int`, `float`, `bool`, `list[X]`, `dict[...]`, `Literal[...]` (an enum), `X | None`
and `Any`; a parameter with a default or typed `X | None` is not required. The description is the
docstring's first paragraph; Google-style `Args:` lines give the parameter descriptions.
`argument_error(arguments, parameters)` checks call arguments against a `parameters` schema; an argument
not in `properties` is refused unless the schema sets `additionalProperties` (models invent arguments).

Guarantees: `argument_error` is total on any JSON value (it returns a message, never raises) and uses JSON
types: an int is a valid number, a bool is neither an integer nor a number, 3.0 is not an integer.
Not here: running tools (`tools.py`); `$ref`, `oneOf`, formats and bounds are not checked (tools given
an explicit schema with those get the subset above checked, the tool itself checks the rest).
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections import abc
from collections.abc import Callable
from typing import Any, Literal, Union

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?)\s*:\s*$")


def type_schema(hint: Any) -> dict[str, Any]:
    """The JSON schema of one Python type hint (raises `TypeError` for a type JSON cannot carry)."""
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        kinds = {_SCALARS.get(type(value)) for value in args}
        schema: dict[str, Any] = {"enum": list(args)}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    if origin in (Union, types.UnionType):
        rest = [arg for arg in args if arg is not type(None)]
        if len(rest) == 1:
            return type_schema(rest[0])
        return {"anyOf": [type_schema(arg) for arg in rest]}
    if hint in (list, tuple) or origin in (list, tuple, abc.Sequence):
        return {"type": "array", "items": type_schema(args[0])} if args else {"type": "array"}
    if hint is dict or origin is dict:
        return {"type": "object"}
    raise TypeError(f"no JSON schema for type {hint!r}")


def _is_optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (Union, types.UnionType) and type(None) in typing.get_args(hint)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph (joined onto one line) and the Google-style `Args:` descriptions by name."""
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        summary.append(line.strip())
    args: dict[str, str] = {}
    current, in_args, indent = "", False, 0
    for line in lines:
        stripped = line.strip()
        section = _SECTION.match(stripped)
        if section:
            in_args, current = section.group(1) in ("Args", "Arguments", "Parameters"), ""
            continue
        if not in_args or not stripped:
            continue
        depth = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(stripped)
        if match and (not current or depth <= indent):
            current, indent = match.group(1).lstrip("*"), depth
            args[current] = match.group(2).strip()
        elif current:
            args[current] = f"{args[current]} {stripped}".strip()
    return " ".join(summary), args


def function_schema(fn: Callable[..., Any], name: str | None = None, description: str | None = None) -> dict[str, Any]:
    """The "function" tool schema of `fn` from its signature, type hints and docstring."""
    hints = typing.get_type_hints(fn)
    summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        hint = hints.get(param.name, Any)
        prop = type_schema(hint)
        if param.name in arg_docs:
            prop["description"] = arg_docs[param.name]
        properties[param.name] = prop
        if param.default is param.empty and not _is_optional(hint):
            required.append(param.name)
    parameters = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": {"name": name or fn.__name__, "description": description or summary,
                                             "parameters": parameters}}  # fmt: skip


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "null":
        return value is None
    return True


def _json_kind(value: Any) -> str:
    for kind in ("boolean", "integer", "number", "string", "array", "object", "null"):
        if _type_ok(value, kind):
            return kind
    return type(value).__name__


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def value_error(value: Any, schema: dict[str, Any], where: str) -> str | None:
    """Why `value` does not fit `schema` (a message naming `where`), or None when it fits."""
    if "anyOf" in schema:
        if all(value_error(value, option, where) for option in schema["anyOf"]):
            return f"{where} does not match any allowed type (got {_json_kind(value)})"
        return None
    kinds = schema.get("type")
    allowed = [kinds] if isinstance(kinds, str) else list(kinds or [])
    if allowed and not any(_type_ok(value, kind) for kind in allowed):
        return f"{where} must be of type {' or '.join(allowed)}, got {_json_kind(value)} {_short(value)}"
    if "enum" in schema and not any(value == option and type(value) is type(option) or (
            _type_ok(value, "number") and _type_ok(option, "number") and value == option) for option in schema["enum"]):
        return f"{where} must be one of {_short(schema['enum'], 200)}, got {_short(value)}"
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            error = value_error(item, schema["items"], f"{where}[{i}]")
            if error:
                return error
    if isinstance(value, dict) and "properties" in schema:
        return argument_error(value, schema, where)
    return None


def argument_error(arguments: dict[str, Any], parameters: dict[str, Any], where: str = "argument") -> str | None:
    """Why `arguments` do not fit the object schema `parameters` (first problem found), or None."""
    properties: dict[str, Any] = parameters.get("properties", {})
    for name in parameters.get("required", []):
        if name not in arguments:
            return f"missing required {where} {name!r}"
    if parameters.get("additionalProperties", False) is False:
        unexpected = [name for name in arguments if name not in properties]
        if unexpected:
            known = ", ".join(properties) or "none"
            return f"unexpected {where} {_short(unexpected[0])} (accepted: {known})"
    for name, value in arguments.items():
        if name in properties:
            error = value_error(value, properties[name], f"{where} {name!r}")
            if error:
                return error
    return None
