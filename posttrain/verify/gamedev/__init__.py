"""The gamedev engine and its two verifiers.

The engine is pure Python with no imports but its own modules, deterministic, and written over plain
data so that a candidate's functions can be compared with it through the sandbox harness:
- `grid.py`: a turn-based grid world (walls, coins, keys and doors, boxes and holes, patrolling
  enemies; `grid_step`), its BFS solver (`solve`, `reachable`) and random levels (`random_grid`);
- `physics.py`: a 2D world at a fixed time step (gravity, a bouncy ground, static axis-aligned boxes;
  `physics_update`) and projectile launches (`launch_hits`);
- `script.py`: the seeded PRNG both use for random play-throughs.
Verifiers: `play.py` (`gamedev_play`: game code played against the engine in the sandbox) and
`levels.py` (`gamedev_level`: text levels checked host-side by the solver). The engine sits in
`verify` rather than with the task family (`posttrain.tasks.families.gamedev`, which imports it)
because the level verifier needs it host-side and `verify` may not import `tasks`.
Not here: prompts, gold solutions, task generation (the family).
"""
