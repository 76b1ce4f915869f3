"""ResultLedger: a job commits once; duplicates and revoked attempts change nothing."""

from __future__ import annotations

import pytest

from posttrain.sched import Outcome, ResultLedger


def test_first_commit_wins_and_duplicates_change_nothing() -> None:
    ledger = ResultLedger()
    first = Outcome("j", 1, 1, "ok")
    assert ledger.commit("j", 1, first)
    assert not ledger.commit("j", 2, Outcome("j", 2, 2, "ok"))
    assert not ledger.commit("j", 1, Outcome("j", 3, 1, "ok"))
    assert ledger.get("j") is first and "j" in ledger and len(ledger) == 1
    assert (ledger.num_committed, ledger.num_duplicates, ledger.num_revoked_results) == (1, 2, 0)
    assert list(ledger) == [first]


def test_a_revoked_attempt_never_commits_but_the_next_does() -> None:
    ledger = ResultLedger()
    ledger.revoke("j", 1)
    assert ledger.is_revoked("j", 1)
    assert not ledger.commit("j", 1, Outcome("j", "late", 1, "ok"))
    assert "j" not in ledger and ledger.get("j") is None
    assert ledger.commit("j", 2, Outcome("j", "retry", 2, "ok"))
    assert ledger.num_revoked_results == 1 and ledger.get("j") == Outcome("j", "retry", 2, "ok")


def test_an_outcome_under_another_job_id_is_a_bug() -> None:
    with pytest.raises(ValueError):
        ResultLedger().commit("j", 1, Outcome("k", None, 1, "ok"))
