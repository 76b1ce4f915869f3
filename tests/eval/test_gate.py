"""The regression gate on scores built by hand: domain drops, class drops, noise, the default suite."""

from __future__ import annotations

from posttrain.eval.gate import GateConfig, gate, pair_by_task, suite_ids


def _ids(domain: str, n: int) -> list[str]:
    return [f"{domain}#{i}" for i in range(n)]


def _scores(domain: str, values: list[float]) -> tuple[list[str], list[float]]:
    return _ids(domain, len(values)), values


def test_a_significant_drop_beyond_the_margin_fails_and_is_named() -> None:
    d = "text/strings/reverse@easy"
    base = {d: _scores(d, [1.0] * 30 + [0.0] * 30)}
    worse = {d: _scores(d, [0.0] * 20 + [1.0] * 10 + [0.0] * 30)}  # 20 of 30 passes lost, none gained
    result = gate("ckpt", base, worse, [d], margin=0.02)
    (row,) = result.domains
    assert row.delta == -20 / 60 and row.regressed and row.ci_high < 0 and row.p_value < 0.05
    assert not result.passed and result.offenders == [d, "class text"]


def test_a_drop_within_the_margin_or_within_noise_passes() -> None:
    d = "math/arithmetic/add@easy"
    base = {d: _scores(d, [1.0] * 100)}
    small = {d: _scores(d, [0.0] * 2 + [1.0] * 98)}  # -2 points exactly: not beyond the margin
    assert gate("ckpt", base, small, [d], margin=0.02).domains[0].regressed is False
    few = {d: _scores(d, [1.0, 1.0, 1.0])}
    dropped = {d: _scores(d, [0.0, 0.0, 0.0])}  # -100 points on 3 tasks: McNemar p = 0.25, not significant
    result = gate("ckpt", few, dropped, [d], margin=0.02)
    assert result.domains[0].delta == -1.0 and result.passed


def test_a_class_fails_on_a_consistent_drop_each_domain_keeps_within_the_margin() -> None:
    domains = [f"data/lists/{op}@easy" for op in ("sum", "sort", "max")]
    base = {d: _scores(d, [0.5] * 50) for d in domains}
    slightly = {d: _scores(d, [0.485] * 50) for d in domains}  # -1.5 points everywhere, no spread
    result = gate("ckpt", base, slightly, domains, margin=0.02)
    assert not any(r.regressed for r in result.domains)
    (cls,) = result.classes
    assert cls.name == "data" and cls.regressed and cls.n == 150
    assert result.offenders == ["class data"]


def test_tasks_are_paired_by_id_and_unpaired_ones_left_out() -> None:
    base = (["a", "b", "c"], [1.0, 0.0, 1.0])
    checkpoint = (["c", "x", "a"], [0.0, 1.0, 1.0])
    assert pair_by_task(base, checkpoint) == ([1.0, 1.0], [0.0, 1.0])


def test_the_default_suite_is_untrained_plus_arithmetic_and_text() -> None:
    ids = ["math/arithmetic/add@easy", "text/strings/reverse@easy", "data/lists/sort@easy", "data/lists/sum@easy",
           "coding/reasoning_gym/x@easy"]  # fmt: skip
    trained = ["math/arithmetic/add@easy", "text/strings/reverse@easy", "data/lists/sort@easy"]
    assert suite_ids([], ids, trained) == ["math/arithmetic/add@easy", "text/strings/reverse@easy",
                                           "data/lists/sum@easy", "coding/reasoning_gym/x@easy"]  # fmt: skip
    assert suite_ids(["data/*"], ids, trained) == ["data/lists/sort@easy", "data/lists/sum@easy"]
    assert GateConfig().margin == 0.02 and not GateConfig().enabled


def test_the_gate_serialises_without_nan() -> None:
    d = "math/arithmetic/add@easy"
    result = gate("ckpt", {d: _scores(d, [1.0])}, {d: (["other#0"], [1.0])}, [d], margin=0.02)
    (row,) = result.domains
    assert row.n == 0 and not row.regressed and row.to_dict()["delta"] is None and result.passed
