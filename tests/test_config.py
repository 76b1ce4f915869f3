"""Config loading: YAML + dotted overrides, one clear message per failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field, ValidationError

from posttrain.config import StrictModel, apply_overrides, load_config
from posttrain.errors import ConfigError


class Inner(StrictModel):
    lr: float = 1e-3
    name: str = "x"


class Outer(StrictModel):
    steps: int = 10
    inner: Inner = Field(default_factory=Inner)
    tags: list[str] = Field(default_factory=list)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_yaml_and_override_are_validated_together(tmp_path: Path) -> None:
    path = write(tmp_path, "steps: 3\ninner: {lr: 0.5}\n")
    config = load_config(Outer, path, ["inner.name=abc", "steps=7"])
    assert (config.steps, config.inner.lr, config.inner.name) == (7, 0.5, "abc")


def test_unknown_key_is_named_with_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "inner: {lrr: 0.5}\n")
    with pytest.raises(ConfigError) as err:
        load_config(Outer, path)
    assert str(path) in str(err.value) and "inner.lrr: unknown key" in str(err.value)


def test_wrong_type_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="steps"):
        load_config(Outer, write(tmp_path, "steps: many\n"))


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "steps: 3\ninner: {lr: [\n")
    with pytest.raises(ConfigError, match=r"c\.yaml:\d+:\d+: YAML syntax error"):
        load_config(Outer, path)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(Outer, tmp_path / "nope.yaml")


def test_bad_override_value_is_rejected_by_the_same_model() -> None:
    with pytest.raises(ConfigError, match="inner.lr"):
        load_config(Outer, None, ["inner.lr=fast"])


def test_override_without_equals_is_rejected() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        apply_overrides({}, ["steps"])


def test_override_indexes_lists() -> None:
    data = apply_overrides({"tags": ["a", "b"]}, ["tags.1=c"])
    assert data == {"tags": ["a", "c"]}


def test_config_models_are_frozen() -> None:
    config = Outer()
    with pytest.raises(ValidationError):
        config.steps = 5  # type: ignore[misc]
