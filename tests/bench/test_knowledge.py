"""The knowledge-serving benchmark: its document, workload and arithmetic, and one toy-sized run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from posttrain.bench.knowledge import byte_encode, main
from posttrain.bench.knowledge_doc import questions_about, synthetic_document
from posttrain.bench.knowledge_runs import (
    BLOCK_SIZE,
    DOCUMENT_PREAMBLE,
    KnowledgeSizes,
    knowledge_workload,
    percentile,
    tier_budget,
    working_set_tokens,
)


def _count(text: str) -> int:
    return len(byte_encode(text))


def test_document_reaches_its_budget_and_is_deterministic() -> None:
    doc = synthetic_document(2000, _count, seed=3)
    assert doc.num_tokens >= 2000 and doc.num_tokens == _count(doc.text)
    assert synthetic_document(2000, _count, seed=3) == doc
    assert synthetic_document(2000, _count, seed=4).text != doc.text
    assert re.search(r"^§1\.1 ", doc.text, re.MULTILINE) and re.search(r"^§2 ", doc.text, re.MULTILINE)


def test_each_question_names_the_section_that_states_its_answer_once() -> None:
    doc = synthetic_document(3000, _count, seed=0)
    sections = dict(re.findall(r"^(§\d+\.\d+) (.*)$", doc.text, re.MULTILINE))
    pairs = questions_about(doc, 12, seed=1)
    assert len({q for q, _ in pairs}) == 12
    for question, answer in pairs:
        section, subject = re.match(r"According to (§\S+), what .* did (.+) report for \d+\?", question).groups()
        body = sections[section]
        assert body.count(f"{subject} reported") == 1
        assert f"{subject} reported" in body and f" of {answer} in " in body


def test_workload_prompts_start_with_the_same_document_tokens() -> None:
    requests = knowledge_workload("§1.1 text.", ["first?", "second, longer?"], byte_encode, group=4, new_tokens=7)
    head = byte_encode(DOCUMENT_PREAMBLE + "§1.1 text.\n\n")
    assert [r.prompt_ids[: len(head)] for r in requests] == [tuple(head)] * 2
    assert requests[1].prompt_ids[len(head):] == tuple(byte_encode("Question: second, longer?\nAnswer:"))
    assert [(r.params.n, r.params.max_new_tokens, r.params.seed) for r in requests] == [(4, 7, 0), (4, 7, 1)]
    assert all(r.params.stop_token_ids == () for r in requests)


def test_percentile_by_hand() -> None:
    # sorted 1, 2, 3, 4: p50 sits halfway between 2 and 3; p90 at 0.9 * 3 = 2.7 -> 3 + 0.7 * (4 - 3)
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert percentile([4.0, 1.0, 3.0, 2.0], 90) == pytest.approx(3.7)
    assert percentile([5.0], 90) == 5.0


def test_working_set_counts_the_document_and_each_question_once() -> None:
    doc_tokens = len(byte_encode(DOCUMENT_PREAMBLE + "D" * 100 + "\n\n"))
    requests = knowledge_workload("D" * 100, ["ab?", "abc?"], byte_encode, group=3, new_tokens=5)
    questions = [len(r.prompt_ids) - doc_tokens for r in requests]  # 20 and 21 tokens ("Question: ...")
    expected = doc_tokens + sum(q + BLOCK_SIZE + 3 * (5 + BLOCK_SIZE) for q in questions)
    assert working_set_tokens(requests, doc_tokens) == expected
    half = tier_budget(KnowledgeSizes(tier_device_fraction=0.5), requests, doc_tokens)
    floor = working_set_tokens(requests[:1], doc_tokens) + BLOCK_SIZE  # never below the document + one group
    assert half == max(int(0.5 * expected), floor)
    assert tier_budget(KnowledgeSizes(device_kv_tokens=10), requests, doc_tokens) == floor


def test_toy_run_writes_every_run_and_ratio(tmp_path: Path) -> None:
    sizes = ["document_tokens=128", "questions=3", "group=2", "new_tokens=4", "hf_questions=1",
             "hf_b0_questions=1", "no_cache_questions=1"]
    argv = ["--threads", "1", "--out", str(tmp_path)] + [x for s in sizes for x in ("--set", s)]
    assert main(argv) == 0
    report = json.loads((tmp_path / "knowledge.json").read_text())
    result = report["result"]
    runs = result["runs"]
    assert set(runs) == {"native", "native_tier_pressure", "native_no_cache", "hf_b1", "hf_b0"}
    assert [runs[n]["questions"] for n in runs] == [3, 3, 1, 1, 1]
    assert all(run["output_tokens"] == run["questions"] * 2 * 4 for run in runs.values())
    assert runs["native"]["cache_hit_rate"] > 0.7 and runs["native_no_cache"]["cache_hit_rate"] == 0
    # the document is computed once: at most the document + each question's own tokens (less where the
    # questions share a start) + the last prompt token a group's other sample recomputes for its logits
    doc, prompts = result["document_tokens"], 3 * result["prompt_tokens_mean"]
    assert doc < runs["native"]["computed_prompt_tokens"] <= doc + (prompts - 3 * doc) + 3
    assert runs["native_no_cache"]["computed_prompt_tokens"] == runs["native_no_cache"]["prompt_tokens"]
    assert result["tier_device_kv_tokens"] < result["working_set_tokens"]
    assert runs["native_tier_pressure"]["kv_cache_tokens"] == result["tier_device_kv_tokens"]
    ratio = result["ratios"]["native_over_hf_b1_output_tokens_per_s"]
    assert ratio == pytest.approx(runs["native"]["output_tokens_per_s"] / runs["hf_b1"]["output_tokens_per_s"])
    assert report["targets"]["native >= 5x hf_b1 (output tokens/s)"]["value"] == ratio
    assert report["sizes"]["questions"] == 3 and report["model"]["rope_parameters"]["rope_type"] == "yarn"
