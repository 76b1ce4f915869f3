"""The gamedev engine: each grid rule on a hand-made grid, the solver against a brute-force search over
`grid_step`, the physics step against hand-computed numbers, the PRNG against splitmix64's published
first output, and the embedded sources against the host's modules."""

from __future__ import annotations

from typing import Any

import pytest

from posttrain.verify.gamedev import grid, physics
from posttrain.verify.gamedev.grid import grid_step, new_state, random_grid, reachable, solve, step_events
from posttrain.verify.gamedev.physics import launch_allowed, launch_hits, physics_update
from posttrain.verify.gamedev.play import GAMES, engine_source
from posttrain.verify.gamedev.script import Rng


def play(rows: list[str], actions: list[str], keys: int = 0) -> dict[str, Any]:
    state = new_state(rows, keys=keys)
    for action in actions:
        state = grid_step(state, action)
    return state


@pytest.mark.parametrize(("rows", "actions", "keys", "grid_after", "counters"), [
    # walk; a wall blocks
    (["#####", "#@.G#", "#####"], ["right"], 0, ["#####", "#.@G#", "#####"], (0, 0, "playing")),
    (["#####", "#@.G#", "#####"], ["left", "up"], 0, ["#####", "#@.G#", "#####"], (0, 0, "playing")),
    # a coin is collected; a key picked up, then spent on a door
    (["####", "#@$#", "####"], ["right"], 0, ["####", "#.@#", "####"], (1, 0, "playing")),
    (["######", "#@kD.#", "######"], ["right", "right", "right"], 0, ["######", "#...@#", "######"], (0, 0, "playing")),
    # a locked door blocks; a key carried in opens it
    (["#####", "#@D.#", "#####"], ["right"], 0, ["#####", "#@D.#", "#####"], (0, 0, "playing")),
    (["#####", "#@D.#", "#####"], ["right"], 1, ["#####", "#.@.#", "#####"], (0, 0, "playing")),
    # the goal wins, and nothing changes after
    (["#####", "#.@G#", "#####"], ["right", "left", "left"], 0, ["#####", "#..@#", "#####"], (0, 0, "won")),
    # a box is pushed; stuck against a wall or a box; falls into a hole; a hole blocks the player
    (["######", "#@B.#", "######"], ["right"], 0, ["######", "#.@B#", "######"], (0, 0, "playing")),
    (["######", "#@B.#", "######"], ["right", "right"], 0, ["######", "#.@B#", "######"], (0, 0, "playing")),
    (["######", "#@BB.#", "######"], ["right"], 0, ["######", "#@BB.#", "######"], (0, 0, "playing")),
    (["######", "#@BO#", "######"], ["right", "right", "right"], 0, ["######", "#..@#", "######"], (0, 0, "playing")),
    (["####", "#@O#", "####"], ["right"], 0, ["####", "#@O#", "####"], (0, 0, "playing")),
])  # fmt: skip
def test_player_rules(rows: list[str], actions: list[str], keys: int, grid_after: list[str],
                      counters: tuple[int, int, str]) -> None:  # fmt: skip
    state = play(rows, actions, keys)
    assert state["grid"] == grid_after
    assert (state["coins"], state["keys"], state["status"]) == counters


def test_an_enemy_patrols_turns_at_a_wall_and_catches_the_player() -> None:
    rows = ["#######", "#@..>.#", "#######"]
    seen = [play(rows, ["wait"] * n)["grid"][1] for n in range(1, 7)]
    # > steps right, turns at the wall, walks back, and its next step would be onto '@'
    assert seen == ["#@...>#", "#@...<#", "#@..<.#", "#@.<..#", "#@<...#", "#@<...#"]
    assert play(rows, ["wait"] * 6)["status"] == "lost"
    assert play(rows, ["wait"] * 5)["status"] == "playing"


def test_walking_into_an_enemy_loses_and_nothing_moves() -> None:
    state = play(["######", "#@<.>#", "######"], ["right"])
    assert (state["grid"][1], state["status"]) == ("#@<.>#", "lost")


def test_enemies_move_once_each_in_reading_order_of_where_they_stood() -> None:
    # The first '>' is blocked by the second and turns; the second moves once (not again from its new cell).
    assert play(["######", "#>>..#", "#@...#", "######"], ["wait"])["grid"][1] == "#<.>.#"
    assert play(["#####", "#>..#", "#...#", "#@..#", "#####"], ["wait"])["grid"][1] == "#.>.#"
    # Once an enemy catches the player, the enemies after it stay put (the '>' would have turned).
    assert play(["######", "#@<.>#", "######"], ["wait"])["grid"][1] == "#@<.>#"


def test_a_vertical_enemy_turns_at_a_wall() -> None:
    rows = ["#####", "#...#", "#.v.#", "#.#.#", "#@..#", "#####"]
    assert [play(rows, ["wait"] * n)["grid"][1:3] for n in (1, 2, 3)] == [
        ["#...#", "#.^.#"], ["#.^.#", "#...#"], ["#.v.#", "#...#"]]  # blocked below, walks up, turns at the top


def test_step_never_changes_its_input_and_rejects_unknown_actions() -> None:
    state = new_state(["#####", "#@$G#", "#####"])
    frozen = {"grid": list(state["grid"]), "coins": 0, "keys": 0, "status": "playing"}
    grid_step(state, "right")
    assert state == frozen
    with pytest.raises(ValueError):
        grid_step(state, "jump")


def test_solver_on_hand_made_levels() -> None:
    assert solve(["#####", "#@.G#", "#####"]) == 2
    assert solve(["#####", "#@#G#", "#####"]) is None
    assert solve(["#######", "#@k#..#", "#..D.G#", "#######"]) == 5  # key, down, door, right, goal
    assert solve(["#######", "#$.@.G#", "#######"]) == 2
    assert solve(["#######", "#$.@.G#", "#######"], collect_coins=True) == 6  # 2 left to the coin, 4 back
    assert solve(["######", "#@G.$#", "######"], collect_coins=True) is None  # the goal ends the game first
    assert reachable(["######", "#@$#$#", "######"]) == {(1, 1), (2, 1)}


def brute_force(rows: list[str], collect_coins: bool) -> int | None:
    """Fewest turns to `won` by breadth-first search over whole `grid_step` states."""
    total = sum(row.count("$") for row in rows)
    frontier = [new_state(rows)]
    seen = {repr(frontier[0])}
    for depth in range(1, 200):
        following = []
        for state in frontier:
            for action in grid.DIRECTIONS:
                after = grid_step(state, action)
                if after["status"] == "won":
                    if not collect_coins or after["coins"] == total:
                        return depth
                    continue
                if repr(after) not in seen:
                    seen.add(repr(after))
                    following.append(after)
        if not following:
            return None
        frontier = following
    return None


@pytest.mark.parametrize("collect_coins", [False, True])
def test_solver_agrees_with_a_search_over_the_engine_itself(collect_coins: bool) -> None:
    rng, solvable = Rng(7), 0
    for _ in range(60):
        rows = random_grid(rng, rng.between(4, 6), rng.between(4, 6), "$kDG", wall_fraction=0.2)
        assert solve(rows, collect_coins) == brute_force(rows, collect_coins), rows
        solvable += solve(rows, collect_coins) is not None
    assert 5 < solvable < 60  # both outcomes were exercised


def test_events_name_what_happened() -> None:
    assert step_events(new_state(["#####", "#@B.#", "#...#", "#####"]), "right")[1] == ["push"]
    assert step_events(play(["####", "#@G#", "####"], ["right"]), "left")[1] == ["over"]


def test_physics_step_by_hand() -> None:
    # vy = 0 - 10 * 0.5 = -5 (velocity first); x = 0 + 2 * 0.5 = 1; y = 10 - 5 * 0.5 = 7.5
    assert physics_update({"x": 0.0, "y": 10.0, "vx": 2.0, "vy": 0.0}, {"dt": 0.5, "gravity": -10.0}) == \
        {"x": 1.0, "y": 7.5, "vx": 2.0, "vy": -5.0}
    # vy = -2 - 5 = -7; y = 0.5 - 3.5 = -3 < 0: y = 0, vy = 7 * 0.5
    bounced = physics_update({"x": 0.0, "y": 0.5, "vx": 0.0, "vy": -2.0}, {"dt": 0.5, "gravity": -10.0, "restitution": 0.5})
    assert (bounced["y"], bounced["vy"]) == (0.0, 3.5)


def test_physics_boxes_by_hand() -> None:
    body = {"x": 0.0, "y": 0.0, "vx": 4.0, "vy": 0.0, "w": 1.0, "h": 1.0}
    # x = 2 overlaps the wall at 2.5..3.5: x = 2.5 - 1, vx = 0; y = 0 - 1 * 0.5; touching is no overlap
    assert physics_update(body, {"dt": 0.5, "gravity": -2.0, "boxes": [[2.5, -1.0, 1.0, 5.0]]}) == \
        {"x": 1.5, "y": -0.5, "vx": 0.0, "vy": -1.0, "w": 1.0, "h": 1.0}
    # vy = -4 - 1 = -5; y = 1.2 - 0.5 = 0.7 sinks into the platform (top 1): y = 1, vy = 0
    falling = {"x": 0.0, "y": 1.2, "vx": 0.0, "vy": -4.0, "w": 1.0, "h": 1.0}
    landed = physics_update(falling, {"dt": 0.1, "gravity": -10.0, "boxes": [[-2.0, 0.0, 5.0, 1.0]]})
    assert (landed["y"], landed["vy"]) == (1.0, 0.0)


def test_launch_by_hand() -> None:
    world = {"dt": 0.01, "gravity": -10.0, "radius": 0.5, "steps": 600}
    # from (0, 0) at (5, 10): back at y = 0 after 2 s, at x = 10
    assert launch_hits(5.0, 10.0, {"x": 10.0, "y": 0.0}, world)
    assert not launch_hits(5.0, 10.0, {"x": 12.0, "y": 0.0}, world)
    assert launch_allowed({"vx": 3.0, "vy": 4.0}, {**world, "speed": 5.0})
    assert not launch_allowed({"vx": 3.0, "vy": 4.1}, {**world, "speed": 5.0})
    assert not launch_allowed({"vx": 5.0, "vy": 9.0}, {**world, "vy": 10.0})


def test_rng_is_splitmix64() -> None:
    rng = Rng(0)
    assert rng.next64() == 0xE220A8397B1DCDAF  # splitmix64's first output from seed 0
    draws = [Rng(3).between(2, 4) for _ in range(3)]
    assert len(set(draws)) == 1 and 2 <= draws[0] <= 4


@pytest.mark.parametrize("game", sorted(GAMES))
def test_the_embedded_engine_is_self_contained_and_the_same(game: str) -> None:
    source = engine_source(game)
    assert "posttrain" not in source.replace("posttrain.verify.gamedev.play", "")
    namespace: dict[str, Any] = {}
    exec(compile(source, "<engine>", "exec"), namespace)  # noqa: S102 - our own engine
    rng = Rng(11)
    if game == "grid":
        for _ in range(20):
            state = new_state(random_grid(rng, 7, 6, "$kDGBO<>^v"))
            for action in ("up", "left", "wait", "down", "right"):
                assert namespace["grid_step"](state, action) == grid_step(state, action)
                state = grid_step(state, action)
    else:
        body, world = {"x": 0.3, "y": 2.0, "vx": 1.0, "vy": 0.0, "w": 1.0, "h": 1.0}, {"dt": 0.1, "gravity": -9.0}
        assert namespace["physics_update"](body, world) == physics.physics_update(body, world)
