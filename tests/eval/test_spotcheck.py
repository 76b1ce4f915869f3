"""Spot checks: the stratified draw, the review files (escaped, offline HTML), and reviewer-verifier agreement
from synthetic verdicts worked out by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from posttrain.errors import UsageError
from posttrain.eval.sample_log import LoggedSample
from posttrain.eval.spotcheck import ReviewItem, agreement, draw, read_review, write_review


def _samples(domain: str, rewarded: int, unrewarded: int) -> list[LoggedSample]:
    rewards = [1.0] * rewarded + [0.0] * unrewarded
    return [LoggedSample(i, domain, f"{domain}#{i}", 0, i, f"response {i}", 4, r, r > 0, "none", prompt=f"prompt {i}")
            for i, r in enumerate(rewards)]  # fmt: skip


def test_the_draw_over_samples_rewarded_ones_and_tops_up_a_short_stratum() -> None:
    samples = _samples("a/b/c", 10, 90) + _samples("d/e/f", 2, 50)
    items = draw(samples, per_domain=10, high_reward_share=0.5, seed=1)
    first = [i for i in items if i.domain_id == "a/b/c"]
    assert len(first) == 10 and sum(i.reward > 0 for i in first) == 5  # 10% of the samples, half the draw
    second = [i for i in items if i.domain_id == "d/e/f"]
    assert len(second) == 10 and sum(i.reward > 0 for i in second) == 2  # only 2 rewarded: 8 from the rest
    assert draw(samples, 10, 0.5, seed=1) == items and draw(samples, 10, 0.5, seed=2) != items
    assert [i.reward > 0 for i in first] != sorted((i.reward > 0 for i in first), reverse=True)  # shuffled
    assert len(draw(_samples("a/b/c", 3, 0), per_domain=10)) == 3


def test_review_files_are_valid_jsonl_and_escaped_offline_html(tmp_path: Path) -> None:
    hostile = LoggedSample(0, "a/b/c", "a/b/c#0", 1, 0, "<script>alert(1)</script><img src=x>", 4, 1.0, True, "none",
                           prompt="<b>&\"quoted\"</b>")  # fmt: skip
    items = draw([hostile, *_samples("a/b/c", 1, 3)], per_domain=5)
    folder = write_review(tmp_path, items)
    lines = [json.loads(line) for line in (folder / "review.jsonl").read_text().splitlines()]
    assert len(lines) == 5 and all(line["verdict"] is None and line["reviewer"] is None for line in lines)
    assert {"id", "domain_id", "task_id", "prompt", "response", "reward", "passed", "note"} <= set(lines[0])
    page = (folder / "review.html").read_text()
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x&gt;" in page
    assert "&lt;b&gt;&amp;&quot;quoted&quot;&lt;/b&gt;" in page
    assert page.count('class="card"') == 5 and not re.search(r"(src|href)=\"?(https?:)?//", page)
    assert read_review(folder / "review.jsonl") == items


def _verdicts(path: Path, rows: list[tuple[ReviewItem, str | None]], reviewer: str | None) -> Path:
    path.write_text("".join(json.dumps({**vars(item), "verdict": v, "reviewer": reviewer}) + "\n" for item, v in rows))
    return path


def test_agreement_per_domain_from_synthetic_verdicts(tmp_path: Path) -> None:
    review = draw(_samples("a/b/c", 5, 5) + _samples("d/e/f", 4, 0), per_domain=10)
    first = [i for i in review if i.domain_id == "a/b/c"]
    # reviewer ann: agrees on every a/b/c item but fails two the verifier passed -> 8/10 agree
    passed = [i for i in first if i.passed]
    ann = [(i, "pass" if i.passed else "fail") for i in first]
    ann = [(i, "fail") if i in passed[:2] else (i, v) for i, v in ann]
    # reviewer bob: judges three d/e/f items (all verifier-passed): pass, pass, fail; one left null
    second = [i for i in review if i.domain_id == "d/e/f"]
    bob = [(second[0], "pass"), (second[1], "pass"), (second[2], "fail"), (second[3], None)]
    files = [_verdicts(tmp_path / "ann.jsonl", ann, "ann"), _verdicts(tmp_path / "bob.jsonl", bob, None)]
    result = agreement(review, [(str(p), read_review(p)) for p in files])
    a, d = result["domains"]["a/b/c"], result["domains"]["d/e/f"]
    assert (a["n"], a["agreement"], a["verifier_pass_reviewer_fail"], a["reviewers"]) == (10, 0.8, 2, 1)
    assert (d["n"], d["agreement"], d["verifier_pass_reviewer_fail"]) == (3, pytest.approx(2 / 3), 1)
    assert a["ci_low"] < 0.8 < a["ci_high"]
    assert result["overall"]["n"] == 13 and result["overall"]["reviewers"] == 2  # bob named by his file


def test_bad_verdicts_and_unknown_ids_are_usage_errors(tmp_path: Path) -> None:
    review = draw(_samples("a/b/c", 2, 2), per_domain=4)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**vars(review[0]), "verdict": "maybe"}) + "\n")
    with pytest.raises(UsageError, match="bad.jsonl:1: verdict must be"):
        read_review(bad)
    stranger = ReviewItem("9:x#9:0", "a/b/c", "x#9", 9, "", "", 0.0, False, verdict="pass")
    with pytest.raises(UsageError, match="is not in the review"):
        agreement(review, [("file", [stranger])])
    (tmp_path / "junk.jsonl").write_text("not json\n")
    with pytest.raises(UsageError, match="junk.jsonl:1: not JSON"):
        read_review(tmp_path / "junk.jsonl")
