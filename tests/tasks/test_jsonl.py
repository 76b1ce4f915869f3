"""JSONL datasets: the three shapes, stable ids, malformed lines reported as file:line: reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.errors import ConfigError
from posttrain.tasks.families.jsonl import JsonlConfig, JsonlFamily


def write_jsonl(path: Path, lines: list[object]) -> Path:
    path.write_bytes(b"\n".join(x if isinstance(x, bytes) else json.dumps(x).encode() for x in lines))
    return path


def test_gsm8k_gold_is_the_number_after_hashes(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "g.jsonl", [{"question": "q?", "answer": "work\n#### 1,234"}])
    family = JsonlFamily(JsonlConfig(path=path, format="gsm8k"))
    task = family.task(family.domain, 0, seed=0)
    assert task.gold == "1234" and task.id == "math/jsonl/g#0"


def test_math_prefers_answer_field_then_boxed(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "m.jsonl",
        [
            {"problem": "p1", "solution": "so \\boxed{\\frac{1}{2}}", "unique_id": "u1"},
            {"problem": "p2", "solution": "\\boxed{3}", "answer": "4"},
        ],
    )
    family = JsonlFamily(JsonlConfig(path=path, format="math"))
    first, second = (family.task(family.domain, i, 0) for i in range(2))
    assert (first.gold, first.id.endswith("#u1")) == ("\\frac{1}{2}", True)
    assert second.gold == "4"


def test_generic_uses_own_ids(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{"id": 7, "prompt": "p", "answer": "a"}])
    family = JsonlFamily(JsonlConfig(path=path, name="mine", cls="qa"))
    assert family.task(family.domain, 0, 0).id == "qa/jsonl/mine#7"


def test_malformed_lines_are_reported_and_skipped(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [{"prompt": "ok", "answer": "1"}, b"{not json", b"\xff\xfe", {"prompt": "no answer"}, [1, 2]],
    )
    family = JsonlFamily(JsonlConfig(path=path))
    assert family.domain.size == 1
    reasons = "\n".join(family.problems)
    assert f"{path}:2: invalid JSON" in reasons
    assert f"{path}:3: invalid UTF-8" in reasons
    assert f"{path}:4: missing field 'answer'" in reasons
    assert f"{path}:5: record is not a JSON object" in reasons


def test_line_index_ids_survive_bad_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [b"oops", {"prompt": "p", "answer": "a"}])
    family = JsonlFamily(JsonlConfig(path=path))
    assert family.task(family.domain, 0, 0).id.endswith("#1")


def test_file_without_records_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no usable records"):
        JsonlFamily(JsonlConfig(path=write_jsonl(tmp_path / "e.jsonl", [b"{"])))


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        JsonlFamily(JsonlConfig(path=tmp_path / "none.jsonl"))
