"""build_verifier: every config kind maps to a verifier; plugins load by `package.module:attr`."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from posttrain.verify import Verifier, VerifierConfig, build_verifier
from posttrain.verify.configs import PluginVerifierConfig
from tests.verify.factories import make_task

ALL_KINDS = [
    {"kind": "exact"},
    {"kind": "normalized"},
    {"kind": "numeric"},
    {"kind": "math"},
    {"kind": "reasoning_gym", "dataset": "basic_arithmetic"},
    {"kind": "plugin", "plugin": "tests.verify.plugins:fixed", "params": {"reward": 0.5}},
]


@pytest.mark.parametrize("data", ALL_KINDS, ids=lambda d: d["kind"])
def test_every_kind_builds_a_verifier(data: dict[str, object]) -> None:
    config = TypeAdapter(VerifierConfig).validate_python(data)
    assert isinstance(build_verifier(config), Verifier)


def test_plugin_params_reach_the_factory() -> None:
    config = PluginVerifierConfig(plugin="tests.verify.plugins:fixed", params={"reward": 0.5})
    assert build_verifier(config).score(make_task("x"), "ok").reward == 0.5


@pytest.mark.parametrize(
    "plugin",
    ["no_colon", "no.such.module:f", "tests.verify.plugins:missing", "tests.verify.plugins:not_a_verifier"],
)
def test_bad_plugin_fails_with_a_message_naming_it(plugin: str) -> None:
    with pytest.raises(ValueError, match="plugin"):
        build_verifier(PluginVerifierConfig(plugin=plugin))
