"""`gamedev_level`: text levels checked against a spec. The gold levels pass; every way to game a spec
(trivial, unsolvable, out of bounds, open border, extra pieces, a door that is not needed, coins in the
wrong place, a route too long) scores 0 as the model's failure, naming the check that failed."""

from __future__ import annotations

import pytest

from posttrain.types import ErrorKind, Score, Task
from posttrain.verify.configs import GameLevelConfig
from posttrain.verify.gamedev.levels import GameLevelVerifier, LevelSpec, parse_level
from tests.verify.gamedev_fixtures import FAMILY, task

VERIFIER = GameLevelVerifier(GameLevelConfig())
MAZE = LevelSpec(width=(5, 7), height=(4, 6), tiles="", moves=(8, 10))
COINS = LevelSpec(width=(5, 8), height=(4, 6), tiles="$", coins=(2, 1))
ROUTE = LevelSpec(width=(5, 8), height=(3, 6), tiles="$", coins=(2, 0), route=(6, 7))
DOORS = LevelSpec(width=(5, 9), height=(3, 6), tiles="kD", doors=1)


def grade(spec: LevelSpec, rows: list[str]) -> Score:
    level = Task(id="l#0", domain_id="gamedev/level/test@easy", prompt="design", gold=spec.to_gold())
    return VERIFIER.score(level, "Here it is:\n```\n" + "\n".join(rows) + "\n```")


def failed(score: Score) -> list[str]:
    assert (score.reward, score.passed, score.error) == (0.0, False, ErrorKind.MODEL), score
    return [name for name, verdict in score.details["checks"].items() if verdict == "fail"]


def test_levels_that_meet_their_spec_pass() -> None:
    assert grade(MAZE, ["#######", "#@....#", "#####.#", "#G....#", "#######"]).passed  # 4 right, 2 down, 4 left
    assert grade(COINS, ["#######", "#@$.#$#", "#.$G###", "#######"]).passed
    assert grade(ROUTE, ["######", "#$@.$#", "##G###", "######"]).passed  # left, right x3, left, down
    assert grade(DOORS, ["#######", "#@k#..#", "#..D.G#", "#######"]).passed


@pytest.mark.parametrize(("spec", "rows", "check"), [
    # trivially solved: the goal next to the start (the shortest solution is below the range)
    (MAZE, ["#######", "#@G...#", "#.....#", "#.....#", "#######"], "moves"),
    # start on the goal: no 'G' left on the grid, or '@' twice
    (MAZE, ["#######", "#@....#", "#.....#", "#.....#", "#######"], "pieces"),
    (MAZE, ["#######", "#@...@#", "#.....#", "#G....#", "#######"], "pieces"),
    # unsolvable: the goal walled off
    (MAZE, ["#######", "#@....#", "#######", "#G....#", "#######"], "solvable"),
    # outside the size bounds, not rectangular, an open border, a tile the spec does not allow
    (MAZE, ["#########", "#@......#", "#######.#", "#G......#", "#########"], "shape"),
    (MAZE, ["#######", "#@....#", "#####.##", "#G....#", "#######"], "shape"),
    (MAZE, ["#######", "#@.....", "#####.#", "#G....#", "#######"], "border"),
    (MAZE, ["#######", "#@..$.#", "#####.#", "#G....#", "#######"], "tiles"),
    # coins: one too few reachable (the walled-off one counted as reachable is not)
    (COINS, ["#######", "#@$..$#", "#.$G###", "#######"], "coins"),
    (COINS, ["#######", "#@$.#$#", "#..G###", "#######"], "counts"),
    # route: the coins are reachable but collecting them all takes longer than the range
    (ROUTE, ["########", "#$@...$#", "##G#####", "########"], "route"),
    # a door that is not needed (the goal is reachable around it)
    (DOORS, ["#######", "#@k#..#", "#..D.G#", "#.....#", "#######"], "doors"),
    # '@' somewhere else than the spec's start
    (LevelSpec(width=(5, 7), height=(4, 6), tiles="", start=(1, 1)), ["#####", "#.@G#", "#####", "#####"], "start"),
    # a door that cannot be opened: no key
    (DOORS, ["#######", "#@.#..#", "#..D.G#", "#######"], "counts"),
])  # fmt: skip
def test_gamed_levels_score_zero(spec: LevelSpec, rows: list[str], check: str) -> None:
    assert check in failed(grade(spec, rows))


def test_later_checks_do_not_run_on_a_malformed_level() -> None:
    checks = grade(MAZE, ["#"])
    assert checks.details["checks"]["shape"] == "fail"
    assert checks.details["checks"]["solvable"] == checks.details["checks"]["moves"] == "not_run"


@pytest.mark.parametrize("response", ["", "zzq ~~ ###garbage###", "```\n\n```", "#" * 10_000, "\n" * 500 + "@G"])
def test_empty_and_garbage_score_zero(response: str) -> None:
    score = VERIFIER.score(task("gamedev/level/maze@easy"), response)
    assert (score.reward, score.passed, score.error) == (0.0, False, ErrorKind.MODEL)


def test_bad_gold_is_infra() -> None:
    for gold in ("not json", {"width": [5]}, [1, 2]):
        bad = Task(id="l#1", domain_id="gamedev/level/test@easy", prompt="p", gold=gold)
        assert VERIFIER.score(bad, "```\n#####\n#@.G#\n#####\n```").is_infra_failure


def test_the_level_is_the_last_fenced_block() -> None:
    assert parse_level("draft:\n```\n###\n```\nfinal:\n```text\n  #####\n  #@.G#\n  #####\n```") == \
        ["#####", "#@.G#", "#####"]


@pytest.mark.parametrize("domain_id", [d.id for d in FAMILY.domains() if d.verifier == "gamedev_level"])
def test_gold_levels_pass_and_report_their_facts(domain_id: str) -> None:
    for index in range(10):
        level = task(domain_id, index)
        score = VERIFIER.score(level, level.answer or "")
        assert score.passed and set(score.details["checks"].values()) == {"pass"}, score
        assert score.details["moves"] is not None
