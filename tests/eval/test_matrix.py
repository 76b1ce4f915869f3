"""The evaluation matrix over a counting fake engine: what the cache saves, determinism, the document."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from posttrain.bench.agents import chatml_tokenizer
from posttrain.eval.cache import ResultCache
from posttrain.eval.collect import Policy, task_seed
from posttrain.eval.matrix import MatrixConfig, evaluate_matrix
from posttrain.rollout import PromptRenderer
from posttrain.rollout.api import GenerationRequest, RequestOutput, SampleOutput
from posttrain.rollout.config import AttentionConfig
from posttrain.tasks.families.arithmetic import ArithmeticConfig
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainRegistry, PluginFamilyConfig
from posttrain.types import Score
from posttrain.verify import ExecutorConfig

DOMAINS = ["math/arithmetic/add@easy", "math/arithmetic/sub@easy", "plugin/example/kv"]


class CountingEngine:
    """Answers a number that depends on the prompt, the temperature and the seed; counts what it is asked."""

    def __init__(self, renderer: PromptRenderer, offset: int = 0) -> None:
        self.renderer, self.offset = renderer, offset
        self.num_calls = 0
        self.num_requests = 0

    def generate(self, requests: Sequence[GenerationRequest]) -> list[RequestOutput]:
        self.num_calls += 1
        self.num_requests += len(requests)
        outputs = []
        for request in requests:
            params = request.params
            value = (sum(request.prompt_ids) + self.offset + (params.seed or 0) * (params.temperature > 0)) % 7
            ids = self.renderer.encode_text(str(value)) + [self.renderer.end_of_turn_id]
            samples = [SampleOutput(ids, [0.0] * len(ids), "stop") for _ in range(params.n)]
            outputs.append(RequestOutput(request.request_id, list(request.prompt_ids), samples))
        return outputs

    def update_weights(self, state_dict: Any, version: int | None = None) -> None:
        del state_dict, version

    def stats(self) -> dict[str, float]:
        return {}


@pytest.fixture(scope="module")
def renderer() -> PromptRenderer:
    return PromptRenderer(chatml_tokenizer(["0 1 2 3 4 5 6 7 8 9 + - = ?"], vocab_size=300))


@pytest.fixture(scope="module")
def pool() -> TaskPool:
    registry = DomainRegistry([
        DomainEntry(family=ArithmeticConfig(ops=["add", "sub"], levels=["easy"])),
        DomainEntry(family=PluginFamilyConfig(plugin="tests.fakes.families:make_kv")),
    ])  # fmt: skip
    return TaskPool(registry, seed=0)


def _policy(label: str, renderer: PromptRenderer, offset: int = 0) -> Policy:
    return Policy(label, f"hash-{label}", CountingEngine(renderer, offset), renderer)  # type: ignore[arg-type]


def _run(policies: list[Policy], pool: TaskPool, cache: ResultCache, **config: Any) -> dict[str, Any]:
    grader = pool.registry.grader(ExecutorConfig(num_workers=0))
    settings = MatrixConfig(**{"tasks_per_domain": 6, "samples_per_task": 3, "max_new_tokens": 8, **config})
    result = evaluate_matrix(policies, pool, DOMAINS, grader.grade, settings, cache, log=lambda _: None)
    return result.document()


def _requests(policy: Policy) -> int:
    return policy.engine.num_requests  # type: ignore[attr-defined,no-any-return]


def test_a_second_run_and_an_added_checkpoint_compute_only_what_is_missing(
    pool: TaskPool, renderer: PromptRenderer, tmp_path: Path
) -> None:
    with ResultCache(tmp_path) as cache:
        base = _policy("base", renderer)
        first = _run([base], pool, cache)
        assert _requests(base) > 0
        assert all(c["cached_samples"] == 0 and c["computed_samples"] == 6 * 4 for c in first["cells"])
    with ResultCache(tmp_path) as cache:  # reopened from disk
        again, other = _policy("base", renderer), _policy("ckpt", renderer, offset=3)
        second = _run([again, other], pool, cache)
    assert _requests(again) == 0  # nothing generated for the cached checkpoint
    assert _requests(other) > 0  # the new one is computed
    cells = {(c["checkpoint"], c["domain_id"]): c for c in second["cells"]}
    assert all(cells[("base", d)]["computed_samples"] == 0 for d in DOMAINS)
    assert all(cells[("ckpt", d)]["cached_samples"] == 0 for d in DOMAINS)
    base_cells = [c for c in second["cells"] if c["checkpoint"] == "base"]
    assert [_numbers(c) for c in base_cells] == [_numbers(c) for c in first["cells"]]  # the same numbers


def test_a_sparse_attention_run_does_not_reuse_the_exact_responses(pool: TaskPool, renderer: PromptRenderer) -> None:
    window = AttentionConfig(kind="window", window_tokens=64)
    with ResultCache(None) as cache:
        _run([_policy("base", renderer)], pool, cache)
        exact_again, sparse = _policy("base", renderer), _policy("base", renderer)
        _run([exact_again], pool, cache, attention=AttentionConfig())
        doc = _run([sparse], pool, cache, attention=window)
    assert _requests(exact_again) == 0  # exact keeps its key
    assert _requests(sparse) > 0 and all(c["cached_samples"] == 0 for c in doc["cells"])
    assert doc["sampling"]["attention"]["kind"] == "window"


def test_more_samples_reuse_the_first_ones(pool: TaskPool, renderer: PromptRenderer) -> None:
    with ResultCache(None) as cache:
        _run([_policy("base", renderer)], pool, cache)
        more = _policy("base", renderer)
        doc = _run([more], pool, cache, samples_per_task=5, pass_k=2)
    single = [c for c in doc["cells"] if c["domain_id"] != "plugin/example/kv"]
    assert all(c["computed_samples"] == 6 * 2 for c in single)  # samples 3 and 4 of each task only
    assert doc["sampling"]["n"] == 5 and doc["sampling"]["k"] == 2


def _numbers(cell: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in cell.items() if k not in ("cached_samples", "computed_samples")}


def test_same_checkpoint_tasks_and_seed_give_identical_documents(pool: TaskPool, renderer: PromptRenderer) -> None:
    docs = []
    for _ in range(2):
        with ResultCache(None) as cache:
            docs.append(_run([_policy("base", renderer), _policy("ckpt", renderer, offset=3)], pool, cache))
    assert json.dumps(docs[0], sort_keys=True) == json.dumps(docs[1], sort_keys=True)
    with ResultCache(None) as cache:
        reseeded = _run([_policy("base", renderer), _policy("ckpt", renderer, offset=3)], pool, cache, seed=1)
    sampled = [c["sampled"]["num_passed"] for c in docs[0]["cells"] if "sampled" in c]
    assert sampled != [c["sampled"]["num_passed"] for c in reseeded["cells"] if "sampled" in c]


def test_the_document_follows_the_schema(pool: TaskPool, renderer: PromptRenderer) -> None:
    with ResultCache(None) as cache:
        doc = _run([_policy("base", renderer), _policy("ckpt", renderer, offset=3)], pool, cache)
    json.dumps(doc, allow_nan=False)  # no NaN anywhere
    assert doc["version"] == 1 and [c["label"] for c in doc["checkpoints"]] == ["base", "ckpt"]
    assert [d["domain_id"] for d in doc["domains"]] == DOMAINS
    assert doc["domains"][0] == {"domain_id": DOMAINS[0], "class": "math", "family": "math/arithmetic",
                                      "verifier": "numeric", "episodic": False, "trained": False}
    assert len(doc["cells"]) == 2 * len(DOMAINS)
    add = doc["cells"][0]
    assert set(add["metrics"]) == {"pass@1", "reward", "pass@1_sampled", "pass@k"}
    assert add["n"] == len(add["task_ids"]) == len(add["rewards"]) == len(add["passed"]) == len(add["responses"]) == 6
    assert add["metrics"]["pass@1"]["value"] == pytest.approx(sum(add["passed"]) / 6)
    kv = doc["cells"][2]
    assert {"success", "completion"} <= set(kv["metrics"])  # an agent domain's episode metrics
    families = {a["family"] for a in doc["aggregates"]["family"]}
    assert families == {"math/arithmetic", "plugin/example"}
    math_row = next(a for a in doc["aggregates"]["class"] if a["class"] == "math" and a["checkpoint"] == "base")
    means = [c["metrics"]["pass@1"]["value"] for c in doc["cells"][:2]]
    assert math_row["metrics"]["pass@1"]["value"] == pytest.approx(sum(means) / 2)
    assert math_row["n"] == 12
    changes = {(r["checkpoint"], r["class"]): r["metrics"] for r in doc["changes"]["classes"]}
    assert doc["changes"]["base"] == "base" and set(changes) == {("ckpt", "math"), ("ckpt", "plugin")}
    ckpt_means = [c["metrics"]["pass@1"]["value"] for c in doc["cells"][3:5]]
    pass1 = changes[("ckpt", "math")]["pass@1"]
    assert pass1["delta"] == pytest.approx((sum(ckpt_means) - sum(means)) / 2) and pass1["n"] == 12
    assert pass1["ci_low"] <= pass1["delta"] <= pass1["ci_high"]
    assert "success_sampled" in changes[("ckpt", "plugin")]  # sampled episodes are compared too


def test_sampled_slots_use_the_task_seed_plus_the_index(pool: TaskPool, renderer: PromptRenderer) -> None:
    task = pool.eval_tasks(DOMAINS[0], 1)[0]
    seed = task_seed(0, task)
    assert seed == task_seed(0, task) and seed != task_seed(1, task) and 0 <= seed < 2**31


def test_infra_failures_are_reported_left_out_and_computed_again(pool: TaskPool, renderer: PromptRenderer) -> None:
    grader = pool.registry.grader(ExecutorConfig(num_workers=0))
    broken = {"on": True}

    def flaky(pairs: Sequence[tuple[Any, str]]) -> list[Score]:
        scores = grader.grade(pairs)
        return [Score.infra("sandbox died") if broken["on"] and t.domain_id == DOMAINS[0] else s
                for (t, _), s in zip(pairs, scores, strict=True)]  # fmt: skip

    settings = MatrixConfig(tasks_per_domain=6, samples_per_task=1, max_new_tokens=8)
    with ResultCache(None) as cache:
        first = evaluate_matrix([_policy("base", renderer)], pool, DOMAINS[:2], flaky, settings, cache, log=print)
        add = first.cell("base", DOMAINS[0]).to_dict()
        assert add["n"] == 0 and add["infra_errors"] == 12 and add["infra_examples"] == ["sandbox died"]
        assert "pass@1" not in add["metrics"] and first.cell("base", DOMAINS[1]).infra_errors == 0
        broken["on"] = False
        again = _policy("base", renderer)
        second = evaluate_matrix([again], pool, DOMAINS[:2], flaky, settings, cache, log=print)
    assert _requests(again) == 12  # only the infra failures are generated again
    assert second.cell("base", DOMAINS[0]).to_dict()["n"] == 6
