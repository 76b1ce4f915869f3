"""Domain registry: YAML declaration, overrides, selection, plugins, clashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrain.errors import ConfigError
from posttrain.tasks.registry import DomainRegistry, load_domains


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "domains.yaml"
    path.write_text(text)
    return path


def test_yaml_declares_domains_with_overrides(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
domains:
  - family: {kind: arithmetic, ops: [add, mul], levels: [easy]}
    target_pass_rate: 0.9
    max_weight: 0.5
    verifier: {kind: exact}
""",
    )
    registry = DomainRegistry.from_config(load_domains(path))
    assert registry.ids() == ["math/arithmetic/add@easy", "math/arithmetic/mul@easy"]
    spec = registry.get("math/arithmetic/add@easy").spec
    assert (spec.target_pass_rate, spec.max_weight, spec.verifier) == (0.9, 0.5, "exact")


def test_include_patterns_filter_a_family(tmp_path: Path) -> None:
    path = write(tmp_path, "domains:\n  - family: {kind: lists}\n    include: ['*@hard']\n")
    assert len(DomainRegistry.from_config(load_domains(path))) == 4


def test_jsonl_path_resolves_against_the_yaml_folder(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"prompt": "p", "answer": "a"}\n')
    path = write(tmp_path, "domains:\n  - family: {kind: jsonl, path: d.jsonl}\n")
    assert DomainRegistry.from_config(load_domains(path)).ids() == ["general/jsonl/d"]


def test_duplicate_domains_are_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "domains:\n  - family: {kind: lists}\n  - family: {kind: lists}\n")
    with pytest.raises(ConfigError, match="declared twice"):
        DomainRegistry.from_config(load_domains(path))


def test_unknown_family_kind_names_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, "domains:\n  - family: {kind: astrology}\n")
    with pytest.raises(ConfigError, match="domains.0.family"):
        load_domains(path)


def test_plugin_family_loads_out_of_tree_code(tmp_path: Path) -> None:
    path = write(tmp_path, "domains:\n  - family: {kind: plugin, plugin: 'tests.fakes.families:make_echo'}\n")
    assert DomainRegistry.from_config(load_domains(path)).ids() == ["plugin/echo/word"]


def test_bad_plugin_path_is_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path, "domains:\n  - family: {kind: plugin, plugin: 'no.such.module:x'}\n")
    with pytest.raises(ConfigError, match="no.such.module"):
        DomainRegistry.from_config(load_domains(path))


def test_select_expands_globs_and_checks_exact_ids(tmp_path: Path) -> None:
    registry = DomainRegistry.from_config(load_domains(write(tmp_path, "domains:\n  - family: {kind: lists}\n")))
    assert len(registry.select(["data/lists/max@*"])) == 3
    with pytest.raises(ConfigError, match="unknown domain"):
        registry.select(["data/lists/min@easy"])
