"""`build_verifier(config)`: the one explicit mapping from verifier config type to implementation.

Out-of-tree verifiers come in through `PluginVerifierConfig.plugin = "package.module:attr"`: `attr`
(dotted attributes allowed) is a callable that takes `**params` and returns an object with
`score(task, response) -> Score`. Building raises `ValueError` with a message naming the plugin when it
cannot be imported or does not produce a verifier; scoring never raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from posttrain.config import load_plugin as resolve_plugin
from posttrain.verify.base import Verifier
from posttrain.verify.configs import (
    ExactConfig,
    MathConfig,
    NormalizedConfig,
    NumericConfig,
    PluginVerifierConfig,
    ReasoningGymConfig,
    VerifierConfig,
)
from posttrain.verify.gym import ReasoningGymVerifier
from posttrain.verify.math_equiv import MathVerifier
from posttrain.verify.text import ExactVerifier, NormalizedVerifier, NumericVerifier


def load_plugin_verifier(config: PluginVerifierConfig) -> Verifier:
    """Import `package.module:attr`, call it with `params`, and check the result is a Verifier."""
    verifier = resolve_plugin(config.plugin)(**config.params)
    if not isinstance(verifier, Verifier):
        raise ValueError(f"plugin {config.plugin!r}: returned {type(verifier).__name__}, not a Verifier")
    return verifier


_BUILDERS: dict[type, Callable[[Any], Verifier]] = {
    ExactConfig: ExactVerifier,
    NormalizedConfig: NormalizedVerifier,
    NumericConfig: NumericVerifier,
    MathConfig: MathVerifier,
    ReasoningGymConfig: ReasoningGymVerifier,
    PluginVerifierConfig: load_plugin_verifier,
}


def build_verifier(config: VerifierConfig) -> Verifier:
    """The verifier implementing `config`."""
    builder = _BUILDERS.get(type(config))
    if builder is None:
        raise ValueError(f"no verifier for config type {type(config).__name__}")
    return builder(config)
