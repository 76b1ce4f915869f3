"""Plug-in dispatch: the one way a config object becomes its implementation.

Every extension point (domain families, verifiers, domain mixtures, rollout engines) is a tagged union of
frozen configs; a `Builders` table maps each config type to the callable that builds it, and the
`plugin` member of each union (a `PluginConfig`) goes through `build_plugin("package.module:attr",
protocol, ...)`, which imports the factory, calls it and checks the result against the extension
point's Protocol. Every
failure is a `ConfigError` naming the config type or the plugin. Not here: the unions themselves (they
live beside their implementations).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, Generic, Literal, TypeVar

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.errors import ConfigError

T = TypeVar("T")


class PluginConfig(StrictModel):
    """The `plugin` member every extension point's union has: a factory named by import path."""

    kind: Literal["plugin"] = "plugin"
    """An out-of-tree implementation."""
    plugin: str
    """`package.module:attr` (dotted attributes allowed): the factory."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the factory."""


class Builders(Generic[T]):
    """Config type -> builder for one extension point, named `what` in error messages."""

    def __init__(self, what: str, builders: Mapping[type, Callable[..., T]]) -> None:
        self.what = what
        self._builders = dict(builders)

    def build(self, config: Any, *args: Any, **kwargs: Any) -> T:
        """`builder(config, *args, **kwargs)` for the builder registered for `type(config)`."""
        builder = self._builders.get(type(config))
        if builder is None:
            raise ConfigError(f"no {self.what} for config type {type(config).__name__}")
        return builder(config, *args, **kwargs)


def load_plugin(spec: str) -> Any:
    """Resolve a `plugin: "package.module:attr"` field to the object it names; failures are ConfigErrors."""
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise ConfigError(f"plugin {spec!r}: expected 'package.module:attr'")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr_path.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"plugin {spec!r}: cannot load: {exc}") from None
    return target


def build_plugin(spec: str, protocol: type[Any], what: str, **kwargs: Any) -> Any:
    """Call the factory `spec` names with `kwargs`; the result must satisfy `protocol` (runtime-checkable)."""
    built = load_plugin(spec)(**kwargs)
    if not isinstance(built, protocol):
        raise ConfigError(f"plugin {spec!r}: returned {type(built).__name__}, not a {what}")
    return built


def plugin_builder(protocol: type[Any], what: str) -> Callable[[PluginConfig], Any]:
    """The builder of a `PluginConfig`: `build_plugin(config.plugin, protocol, what, **config.params)`."""

    def build(config: PluginConfig) -> Any:
        return build_plugin(config.plugin, protocol, what, **config.params)

    return build
