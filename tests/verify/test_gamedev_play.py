"""`gamedev_play` in the sandbox: gold passes with per-play-through details; each reward hack scores 0
as the model's failure (the input state returned, a lying `__eq__`, the scripted play-throughs or the
prompt's example hard-coded, the rules of an easier level, the reference engine looked for in memory and
on disk, a hang); bad gold is infra. Without bubblewrap only the host-side tests run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from posttrain.types import ErrorKind, Score, Task
from posttrain.verify.configs import GamePlayConfig
from posttrain.verify.gamedev.grid import grid_cases, grid_step
from posttrain.verify.gamedev.play import GamePlayVerifier, engine_source
from tests.verify.code_fixtures import requires_bwrap
from tests.verify.gamedev_fixtures import task

BOXES = "gamedev/logic/boxes@medium"
HARD_GRID = "gamedev/logic/grid@hard"


@pytest.fixture(scope="module")
def verifier() -> Iterator[GamePlayVerifier]:
    played = GamePlayVerifier(GamePlayConfig(timeout_s=2.0), pool_size=4)
    yield played
    played.close()


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def memorised(cases: list[tuple[dict[str, Any], str]]) -> str:
    """A `step` that knows the reference answer for these (state, action) pairs and returns the input
    state for any other: what a policy that fitted the scripted play-throughs would write."""
    table = {json.dumps([s, a], sort_keys=True): grid_step(s, a) for s, a in cases}
    return fenced(f"import json\nTABLE = {table!r}\n\ndef step(state, action):\n"
                  "    return TABLE.get(json.dumps([state, action], sort_keys=True), state)\n")  # fmt: skip


def fixed_steps(gold: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    pairs = []
    for case in grid_cases({**gold, "random": {**gold["random"], "count": 0}}, 0):
        state = case["start"]
        for action in case["actions"]:
            pairs.append((state, action))
            state = grid_step(state, action)
    return pairs


STEAL = """
import gc, glob, os

def _engine():
    for thing in gc.get_objects():
        if callable(thing) and getattr(thing, "__name__", "") == "grid_step":
            return thing
    for root in ("/work", "/workspace", "/tmp", "/root", "/home", os.getcwd()):
        for path in glob.glob(root + "/**/gamedev/grid.py", recursive=True):
            namespace = {}
            exec(open(path).read().replace("from posttrain", "# "), namespace)
            return namespace["grid_step"]
    return None

REFERENCE = _engine()

def step(state, action):
    return REFERENCE(state, action) if REFERENCE else state
"""

LYING = """
class Anything(dict):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False

def step(state, action):
    return Anything(state)
"""


def hacks(domain_id: str) -> dict[str, str]:
    t = task(domain_id)
    assert isinstance(t.gold, dict)
    example = json.loads(t.prompt.split("Example: step(")[1].split(")\nreturns")[0].join("[]"))
    return {
        "identity": fenced("def step(state, action):\n    return state"),
        "copy_of_input": fenced("def step(state, action):\n    return dict(state, grid=list(state['grid']))"),
        "lying_eq": fenced(LYING),
        "hard_coded_fixed": memorised(fixed_steps(t.gold)),
        "hard_coded_example": memorised([(example[0], example[1])]),
        "steal_the_engine": fenced(STEAL),
        "hang": fenced("def step(state, action):\n    while True:\n        pass"),
        "crash_on_import": fenced("raise SystemExit(0)\ndef step(state, action):\n    return state"),
    }


def assert_model_zero(score: Score) -> None:
    assert (score.reward, score.passed, score.error) == (0.0, False, ErrorKind.MODEL), score


@requires_bwrap
def test_gold_passes_with_every_playthrough_named(verifier: GamePlayVerifier) -> None:
    for domain_id in (BOXES, "gamedev/logic/enemies@hard", "gamedev/physics/motion@hard", "gamedev/physics/launch@hard"):
        t = task(domain_id)
        score = verifier.score(t, t.answer or "")
        assert score.passed, score
        played = score.details["playthroughs"]
        assert [p["status"] for p in played] == ["pass"] * len(played)
        assert played[-1]["name"] == "random-4" and played[0]["name"] == "fixed-1"


@requires_bwrap
@pytest.mark.parametrize("domain_id", [BOXES, HARD_GRID])
def test_every_hack_scores_zero(verifier: GamePlayVerifier, domain_id: str) -> None:
    made = hacks(domain_id)
    scores = verifier.score_many([(task(domain_id), response) for response in made.values()])
    for name, score in zip(made, scores, strict=True):
        assert_model_zero(score)
        assert score.details["tests_passed"] < score.details["tests_total"], name


@requires_bwrap
def test_a_lying_eq_never_reaches_the_comparison(verifier: GamePlayVerifier) -> None:
    """The object cannot cross to the parent (marshal takes exact builtins only), so every play-through
    is an `error` at the first call, not a comparison the object could win."""
    score = verifier.score(task(BOXES), fenced(LYING))
    assert_model_zero(score)
    assert {p["status"] for p in score.details["playthroughs"]} == {"error"}


@requires_bwrap
def test_hard_coded_playthroughs_pass_the_scripted_ones_and_fail_the_random_ones() -> None:
    """Fixed seeds, so the test is deterministic: a random play-through can, rarely, stay on states the
    memorised table returns unchanged (a play-through into walls), which a secret seed would make flaky."""
    t = task(BOXES)
    assert isinstance(t.gold, dict)
    for seed in (1, 2, 3):
        score = GamePlayVerifier(GamePlayConfig(timeout_s=2.0, seed=seed)).score(t, memorised(fixed_steps(t.gold)))
        statuses = {p["name"]: p["status"] for p in score.details["playthroughs"]}
        assert all(s == "pass" for n, s in statuses.items() if n.startswith("fixed"))
        assert all(s == "fail" for n, s in statuses.items() if n.startswith("random"))
        assert "random-1" in score.message and score.reward == 0.0


@requires_bwrap
def test_the_steal_hack_is_a_real_detector(verifier: GamePlayVerifier) -> None:
    """With the engine planted where the hack looks (its own memory), the hack passes: so it scores 0
    above because the engine is nowhere in the candidate's process or file system."""
    planted = engine_source("grid") + "\n" + STEAL
    t = task(BOXES)
    assert verifier.score(t, fenced(planted)).passed


@requires_bwrap
def test_the_rules_of_an_easier_level_fail(verifier: GamePlayVerifier) -> None:
    easier = task("gamedev/logic/grid@medium").answer or ""
    assert_model_zero(verifier.score(task(HARD_GRID), easier))
    assert_model_zero(verifier.score(task("gamedev/logic/boxes@medium"), task("gamedev/logic/boxes@easy").answer or ""))


@requires_bwrap
@pytest.mark.parametrize(("domain_id", "response"), [
    ("gamedev/physics/motion@easy", "def update(body, world):\n    return body"),
    # explicit Euler (the old velocity moves the body): off by gravity * dt**2 per step
    ("gamedev/physics/motion@easy", "def update(body, world):\n    x = body['x'] + body['vx'] * world['dt']\n"
                                    "    y = body['y'] + body['vy'] * world['dt']\n"
                                    "    return {'x': x, 'y': y, 'vx': body['vx'], 'vy': body['vy'] + world['gravity'] * world['dt']}"),
    ("gamedev/physics/launch@medium", "def launch(target):\n    return target"),
    ("gamedev/physics/launch@medium", "def launch(target):\n    return {'vx': float('nan'), 'vy': float('nan')}"),
    # ignores the fixed speed: aims straight at the target, fast
    ("gamedev/physics/launch@hard", "def launch(target):\n    return {'vx': target['x'] * 10, 'vy': target['y'] * 10}"),
])  # fmt: skip
def test_physics_hacks_score_zero(verifier: GamePlayVerifier, domain_id: str, response: str) -> None:
    assert_model_zero(verifier.score(task(domain_id), fenced(response)))


def test_each_grading_draws_new_random_playthroughs() -> None:
    played = GamePlayVerifier(GamePlayConfig())
    t = task(BOXES)
    setups = {played._prepare(t)[0].gold["setup"] for _ in range(5)}  # type: ignore[index]
    assert len(setups) == 5
    assert isinstance(t.gold, dict)
    first, second = grid_cases(t.gold, 1), grid_cases(t.gold, 2)
    assert first[0] == second[0] and first[-1] != second[-1]  # fixed the same, random not
    fixed = GamePlayVerifier(GamePlayConfig(seed=42))
    assert fixed._prepare(t)[0].gold["setup"] == "PLAY_SEED = 42\n"  # type: ignore[index]


@pytest.mark.parametrize("gold", [
    {"game": "chess", "entry_point": "step", "fixed": [], "random": {"count": 1}},
    {"game": "grid", "entry_point": "not an identifier", "fixed": [], "random": {"count": 1}},
    {"game": "grid", "entry_point": "step", "fixed": [], "random": {"count": 0}},
    {"game": "grid", "entry_point": "step"},
    {"game": ["grid"], "entry_point": "step", "fixed": [], "random": {"count": 1}},
    {"game": "grid", "entry_point": "step", "fixed": [], "random": {"count": 1}, "tiles": float("nan")},
    "not json",
])  # fmt: skip
def test_bad_gold_is_infra_without_running_anything(gold: Any) -> None:
    bad = Task(id="g#0", domain_id="gamedev/logic/test@easy", prompt="p", gold=gold)
    score = GamePlayVerifier(GamePlayConfig()).score(bad, "def step(s, a):\n    return s")
    assert score.is_infra_failure, score
