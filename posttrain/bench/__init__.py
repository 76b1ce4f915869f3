"""Benchmarks and the curriculum simulator: code that measures the library, kept out of it.

Each benchmark module (`sandbox`, `curriculum`, `rollout`, `pipeline`) exposes
`main(argv: list[str]) -> int`, writes JSON, and reports every figure as a ratio against a baseline
measured in the same run. This package imports the library; the library never imports it (only
`posttrain.cli`, the root `bench/*.py` scripts and the tests do). Not run by the default test suite
beyond small smoke runs.
"""
