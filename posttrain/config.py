"""Config loading: YAML files validated by frozen pydantic models, with dotted `--set` overrides.

Guarantees: every failure (missing file, YAML syntax, a file over `MAX_CONFIG_BYTES`, nesting deeper than
the parser's recursion limit, an out-of-range literal, unknown key, wrong type, bad override) raises
`ConfigError` whose message names the file and the key or line; callers print it, never a traceback.
Overrides are applied to the raw mapping and validated by the same model as the file.
Not here: the per-package config models themselves (they live beside their users).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from posttrain.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def cache_root() -> Path:
    """Where posttrain keeps what it converts or builds (models, compiled kernels): $POSTTRAIN_CACHE,
    else ~/.cache/posttrain."""
    return Path(os.environ.get("POSTTRAIN_CACHE", Path.home() / ".cache" / "posttrain"))


MAX_CONFIG_BYTES = 16 << 20
"""Largest config file read; anything bigger is not a hand-written config and is refused unparsed."""


class StrictModel(BaseModel):
    """Base for config models: frozen, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Parse a YAML mapping, turning every failure into a ConfigError naming the file (and line)."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: config is larger than {MAX_CONFIG_BYTES >> 20} MiB")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{where}: YAML syntax error: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{path}: YAML nested too deeply") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of more than 4300 digits
        raise ConfigError(f"{path}: YAML value out of range: {str(exc)[:200]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a", "b", "c"], value parsed as a YAML scalar/flow value)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r}: expected key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except (yaml.YAMLError, RecursionError, ValueError):
        value = raw
    return [part for part in key.strip().split(".")], value


def apply_overrides(data: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Return a deep copy of `data` with each dotted override set (list items by integer index)."""
    result: dict[str, Any] = _deep_copy(dict(data))
    for text in overrides:
        keys, value = parse_override(text)
        node: Any = result
        for i, key in enumerate(keys[:-1]):
            node = _child(node, key, text, create=not isinstance(node, list))
            if not isinstance(node, dict | list):
                raise ConfigError(f"--set {text!r}: {'.'.join(keys[: i + 1])} is not a mapping")
        _assign(node, keys[-1], value, text)
    return result


def validate(model: type[M], data: Mapping[str, Any], source: str) -> M:
    """Validate `data` against `model`; errors name the dotted key and the source."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None


def load_config(model: type[M], path: str | Path | None, overrides: Iterable[str] = ()) -> M:
    """Load `path` (or an empty mapping), apply overrides, validate."""
    data = read_yaml(path) if path is not None else {}
    overrides = list(overrides)
    data = apply_overrides(data, overrides)
    source = str(path) if path is not None else "<defaults>"
    if overrides:
        source += " (with --set overrides)"
    return validate(model, data, source)


def format_validation_error(exc: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid config"]
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"]) or "<root>"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        lines.append(f"  {loc}: {msg}")
    return "\n".join(lines)


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _child(node: Any, key: str, text: str, create: bool) -> Any:
    if isinstance(node, list):
        index = _index(node, key, text)
        return node[index]
    if key not in node or node[key] is None:
        if not create:
            raise ConfigError(f"--set {text!r}: no key {key!r}")
        node[key] = {}
    return node[key]


def _assign(node: Any, key: str, value: Any, text: str) -> None:
    if isinstance(node, list):
        node[_index(node, key, text)] = value
    else:
        node[key] = value


def _index(node: list[Any], key: str, text: str) -> int:
    try:
        index = int(key)
        node[index]
    except (ValueError, IndexError):
        raise ConfigError(f"--set {text!r}: {key!r} is not a valid list index") from None
    return index
