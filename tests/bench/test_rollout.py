"""The rollout benchmark's target checklist, and (slow) one real workload end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.bench.rollout import main, targets


def test_targets_read_ratios_and_leave_unmeasured_ones_open() -> None:
    verdicts = targets({"W1": {"speedup_vs_B0": 5.0, "speedup_vs_B1": 1.2, "max_waste_slots": 3}})
    assert verdicts["W1 >= 4x B0"]["met"] is True
    assert verdicts["W1 >= 1.5x B1"]["met"] is False
    assert verdicts["W2 >= 3x B0"]["met"] is None


@pytest.mark.slow
def test_quick_w3_run_writes_json(tmp_path: Path) -> None:
    assert main(["--quick", "--workloads", "W3", "--threads", "1", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "rollout.json").read_text())
    assert report["sizes"]["w3_shared_tokens"] == 512
    assert report["targets"]["small"]["W3 recomputed == unique"]["met"] is True


def test_projection_benchmark_reports_both_forms_per_row_count(tmp_path: Path) -> None:
    assert main(["--quick", "--workloads", "proj", "--threads", "1", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "rollout.json").read_text())["results"]["small"]["proj"]
    assert set(result) == {f"rows_{n}" for n in (1, 2, 4, 8, 16, 32, 64, 128, 256)}
    from posttrain.rollout.engine import cpu_kernels
    from posttrain.rollout.engine.packed import ONEDNN

    for cell in result.values():
        assert cell["linear_ms"] > 0 and cell["project_ms"] > 0
        assert cell["speedup"] == pytest.approx(cell["linear_ms"] / cell["project_ms"])
        assert ("onednn_ms" in cell) == ONEDNN
        assert ("panels_ms" in cell) == cpu_kernels.available()
        if ONEDNN and cpu_kernels.available():
            assert cell["panels_vs_onednn"] == pytest.approx(cell["onednn_ms"] / cell["panels_ms"])


def test_w7_prompts_are_distinct_windows_of_the_passage_within_the_vocabulary() -> None:
    from posttrain.bench.rollout_text import PASSAGE, text_encoder, text_prompts

    class Tiny:
        name_or_path = ""

        class config:  # noqa: N801 - mimics a transformers model's attribute
            vocab_size = 64

    encode = text_encoder(Tiny())
    prompts = text_prompts(encode, 4, 200)
    assert [len(p) for p in prompts] == [200] * 4
    assert len({tuple(p[:8]) for p in prompts}) == 4  # no two prompts start alike
    full = encode(PASSAGE)
    assert all(3 <= t < 64 for t in full)
    stride = (len(full) - 200) // 4
    assert prompts[1] == full[stride : stride + 200]


def test_w7_runs_every_engine_and_reports_ratios_of_medians() -> None:
    from posttrain.bench.rollout import build_model
    from posttrain.bench.rollout_text import w7_text_group
    from posttrain.bench.rollout_workloads import BenchSizes

    sizes = BenchSizes(w7_prompts=2, w7_group=3, w7_prompt_tokens=24, w7_new_tokens=4, w7_rounds=3)
    result = w7_text_group(build_model("small"), sizes)
    assert result["generated_tokens"] == 2 * 3 * 4
    assert len(result["load_avg_1m"]) == 4
    for name in ("native", "B0", "generate"):
        rounds = result[name]["wall_s_rounds"]
        assert len(rounds) == 3 and result[name]["wall_s"] == sorted(rounds)[1]
    assert result["speedup_vs_B0"] == pytest.approx(result["B0"]["wall_s"] / result["native"]["wall_s"])
    assert result["speedup_vs_generate"] == pytest.approx(result["generate"]["wall_s"] / result["native"]["wall_s"])
