"""`posttrain eval --checkpoints`: argument checks, and a whole matrix over a small random model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from posttrain.cli import main
from posttrain.cli.evaluate import budgets, parse_attention, parse_checkpoints
from posttrain.errors import UsageError

DOMAINS = {"seed": 0, "eval_fraction": 0.25,
           "domains": [{"family": {"kind": "arithmetic", "ops": ["add", "sub"], "levels": ["easy"]}}]}  # fmt: skip


def test_checkpoint_labels() -> None:
    assert parse_checkpoints(["base=tiny", "runs/a"]) == [("base", "tiny"), ("runs/a", "runs/a")]
    assert parse_checkpoints(["x=a=b"]) == [("x", "a=b")]
    with pytest.raises(UsageError, match="unique"):
        parse_checkpoints(["a=tiny", "a=smollm2-135m"])


def test_attention_specs() -> None:
    assert parse_attention("exact").kind == "exact"
    window = parse_attention("window:512")
    assert (window.kind, window.window_tokens) == ("window", 512)
    quest = parse_attention("quest:8")
    assert (quest.kind, quest.top_k_blocks) == ("quest", 8)
    for bad in ("window", "quest:x", "exact:3", "dense:4", "window:0"):
        with pytest.raises(UsageError, match="--attention"):
            parse_attention(bad)


def test_budgets_default_to_the_configs_own() -> None:
    import argparse

    from posttrain.train.config import TrainConfig

    config = TrainConfig.model_validate(yaml.safe_load(Path("configs/agents-tiny.yaml").read_text()))
    unset = argparse.Namespace(max_new_tokens=None, max_total_tokens=None)
    assert budgets(unset, config) == {"max_new_tokens": 48, "max_total_tokens": 512}
    given = argparse.Namespace(max_new_tokens=16, max_total_tokens=1024)
    assert budgets(given, config) == {"max_new_tokens": 16, "max_total_tokens": 1024}


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval"]) == 2
    assert main(["eval", "--model", "tiny", "--checkpoints", "base=tiny"]) == 2
    assert main(["eval", "--checkpoints", "a=tiny", "--out", "x", "--gate"]) == 2  # no checkpoint labelled base
    assert main(["eval", "--checkpoints", "base=tiny"]) == 2  # no --out
    assert "error:" in capsys.readouterr().err


@pytest.mark.slow
def test_a_matrix_of_two_checkpoints_then_a_rerun_from_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from posttrain.bench.agents import chatml_tokenizer
    from posttrain.train.checkpoint import save_checkpoint

    tokenizer = chatml_tokenizer(["0 1 2 3 4 5 6 7 8 9 + - ="], vocab_size=300)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512)  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval()
    hf = tmp_path / "hf"
    model.save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"model": {"path": str(hf)}, "domains": DOMAINS}))
    with torch.no_grad():
        model.lm_head.weight.mul_(-1.0)
    save_checkpoint(run, {"model": model.state_dict(), "step": 1})
    domains = tmp_path / "domains.yaml"
    domains.write_text(yaml.safe_dump(DOMAINS))
    out = tmp_path / "out"
    argv = ["eval", "--checkpoints", f"base={hf}", f"trained={run}", "--domains", str(domains), "--out", str(out),
            "--tasks-per-domain", "3", "--max-new-tokens", "3", "--samples-per-task", "2", "--workers", "0",
            "--threads", "1", "--gate", "--suite", "math/*"]  # fmt: skip
    code = main(argv)
    doc = json.loads((out / "matrix.json").read_text())
    assert code == (0 if doc["gate"]["passed"] else 1)
    assert [c["label"] for c in doc["checkpoints"]] == ["base", "trained"]
    assert doc["checkpoints"][1]["trained_domains"] == ["math/arithmetic/add@easy", "math/arithmetic/sub@easy"]
    assert len(doc["cells"]) == 4 and all(c["computed_samples"] == 9 for c in doc["cells"])
    assert doc["gate"]["checkpoints"][0]["suite"] == ["math/arithmetic/add@easy", "math/arithmetic/sub@easy"]
    assert (out / "cache" / "results.sqlite").is_file()
    assert [r["checkpoint"] for r in doc["changes"]["classes"]] == ["trained"]
    assert "change against base" in capsys.readouterr().out
    assert main(argv) == code
    again = json.loads((out / "matrix.json").read_text())
    assert all(c["computed_samples"] == 0 and c["cached_samples"] == 9 for c in again["cells"])
    strip = ("cached_samples", "computed_samples")
    assert [{k: v for k, v in c.items() if k not in strip} for c in again["cells"]] == \
        [{k: v for k, v in c.items() if k not in strip} for c in doc["cells"]]  # fmt: skip
