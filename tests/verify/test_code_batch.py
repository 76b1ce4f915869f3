"""Responses graded in one sandbox run cannot reach each other: a response that leaves processes or
files behind, or changes what the harness passes on to the next program, must not change a sibling's
score (in GRPO, lowering a sibling's reward raises one's own advantage). Each test puts the attack first
in a one-sandbox pool, so the honest responses after it run in the same run."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from posttrain.types import ErrorKind, Score
from posttrain.verify.code import CodeTestsVerifier
from posttrain.verify.configs import CodeTestsConfig
from tests.verify.code_fixtures import function_task, requires_bwrap

pytestmark = requires_bwrap

TESTS = """
def check(candidate):
    assert candidate(1) == 2
    assert candidate(2) == 3
    assert candidate(3) == 4
"""
HONEST = "import time\n\ndef f(x):\n    time.sleep(0.1)\n    return x + 1\n"
"""Correct, and slow enough (0.3 s) that something left running by an earlier response would hit it."""


@pytest.fixture(scope="module")
def one_sandbox() -> Iterator[CodeTestsVerifier]:
    """One sandbox: a batch of up to `MAX_RUN_ITEMS` responses is one run, in order."""
    verifier = CodeTestsVerifier(CodeTestsConfig(timeout_s=2.0), pool_size=1)
    yield verifier
    verifier.close()


def grade_after(verifier: CodeTestsVerifier, attack: str, honest: int = 3) -> tuple[Score, list[Score]]:
    task = function_task(TESTS)
    scores = verifier.score_many([(task, attack)] + [(task, HONEST)] * honest)
    return scores[0], scores[1:]


def assert_siblings_pass(siblings: list[Score]) -> None:
    for score in siblings:
        assert (score.reward, score.passed, score.error) == (1.0, True, ErrorKind.NONE), score


LEFTOVER = """
import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # detached from the program's process, reparented away from it
        time.sleep(0.05)
        for _ in range(400):
            try:
                os.kill(-1, signal.SIGKILL)  # every process of this user but itself
            except OSError:
                pass
            time.sleep(0.01)
        os._exit(0)
    os._exit(0)

def f(x):
    return x + 1
"""


def test_a_process_left_running_by_one_response_is_gone_before_the_next(one_sandbox: CodeTestsVerifier) -> None:
    first, siblings = grade_after(one_sandbox, LEFTOVER)
    assert first.passed  # its own calls finish before its leftover wakes up
    assert_siblings_pass(siblings)


LEFT_FILES = """
import os
for place in ("/tmp", ".", "/dev/shm"):
    try:
        os.makedirs(f"{place}/left/deep", exist_ok=True)
        open(f"{place}/left/deep/data", "w").write("x" * 100000)
        open(f"{place}/note.txt", "w").write("seen")
        os.symlink("/usr", f"{place}/link")
        os.chmod(f"{place}/left/deep", 0)
        os.chmod(f"{place}/left", 0)
    except OSError:
        pass

def f(x):
    return x + 1
"""
SEES_NOTHING = """
import os
for place in ("/tmp", ".", "/dev/shm"):
    if os.path.isdir(place) and os.listdir(place):
        raise RuntimeError(f"{place} holds {os.listdir(place)}")
""" + HONEST


def test_files_left_by_one_response_are_gone_before_the_next(one_sandbox: CodeTestsVerifier) -> None:
    task = function_task(TESTS)
    scores = one_sandbox.score_many([(task, LEFT_FILES)] + [(task, SEES_NOTHING)] * 2)
    assert scores[0].passed
    assert_siblings_pass(scores[1:])
    assert os.path.isdir("/usr/bin")  # the link into the host's tree was removed, not followed


TAMPERING = {
    "nofile": "import resource\nresource.prlimit(TARGET, resource.RLIMIT_NOFILE, (16, 16))",
    "cpu": "import resource\nresource.prlimit(TARGET, resource.RLIMIT_CPU, (1, 1))",
    "address_space": "import resource\nresource.prlimit(TARGET, resource.RLIMIT_AS, (1 << 26, 1 << 26))",
    "nice": "os.setpriority(os.PRIO_PROCESS, TARGET, 19)",
    "affinity": "os.sched_setaffinity(TARGET, {min(os.sched_getaffinity(0))})",
    "scheduler": "os.sched_setscheduler(TARGET, os.SCHED_IDLE, os.sched_param(0))",
}
TARGETS = {
    "harness": "int(open(f'/proc/{os.getppid()}/stat').read().rpartition(')')[2].split()[1])",
    "zygote": "os.getppid()",
}
"""The harness parent is the program's grandparent; its parent is the zygote it was forked from."""
UNTOUCHED = """
import os, resource
assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] != 16 and resource.getrlimit(resource.RLIMIT_CPU)[0] != 1
assert resource.getrlimit(resource.RLIMIT_AS)[0] != 1 << 26 and os.getpriority(os.PRIO_PROCESS, 0) != 19
assert os.sched_getscheduler(0) != os.SCHED_IDLE and len(os.sched_getaffinity(0)) == os.cpu_count()
""" + HONEST
"""Correct, and fails at import if it inherited any of the values `TAMPERING` sets."""


@pytest.mark.parametrize("attack", sorted(TAMPERING))
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_changing_what_the_next_program_would_inherit_cannot_reach_it(
    attack: str, target: str, one_sandbox: CodeTestsVerifier
) -> None:
    """A correct function whose module also lowers the limits or priority of the harness parent (then it
    scores 0 as the model's failure, status `tampered`, and the rest run in a new run) or of the zygote
    (replaced before the next response: nothing to charge). Either way the next programs inherit nothing."""
    if attack == "affinity" and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no affinity to narrow")
    program = f"import os\nTARGET = {TARGETS[target]}\n{TAMPERING[attack]}\n\ndef f(x):\n    return x + 1\n"
    task = function_task(TESTS)
    first, *siblings = one_sandbox.score_many([(task, program)] + [(task, UNTOUCHED)] * 2)
    if target == "harness":
        assert (first.reward, first.error, first.details["status"]) == (0.0, ErrorKind.MODEL, "tampered"), first
    else:
        assert first.passed, first
    assert_siblings_pass(siblings)


def test_stopping_the_harness_costs_only_the_response_that_did_it(one_sandbox: CodeTestsVerifier) -> None:
    """SIGSTOP to the parent: no verdict until the run's wall limit; the stopper is charged (a timeout)
    and the responses it kept from starting are graded in the next run."""
    program = f"import os, signal\nos.kill({TARGETS['harness']}, signal.SIGSTOP)\n\ndef f(x):\n    return x + 1\n"
    first, siblings = grade_after(one_sandbox, program, honest=2)
    assert (first.reward, first.error, first.details["status"]) == (0.0, ErrorKind.MODEL, "timeout"), first
    assert_siblings_pass(siblings)


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGSTOP", "SIGINT", "SIGTERM"])
@pytest.mark.parametrize("when", ["import", "call"])
def test_a_killed_or_stopped_zygote_is_replaced(signal_name: str, when: str, one_sandbox: CodeTestsVerifier) -> None:
    """The zygote signalled at import or during the last call (then it may still be exiting when the next
    response asks it for a process): the next responses get a new one, and nothing is charged."""
    send = f"os.kill(os.getppid(), signal.{signal_name})"
    if when == "import":
        program = f"import os, signal\n{send}\n\ndef f(x):\n    return x + 1\n"
    else:  # in the last call (the zygote is still exiting when the harness needs the next process)
        program = f"import os, signal\n\ndef f(x):\n    if x == 3:\n        {send}\n    return x + 1\n"
    first, siblings = grade_after(one_sandbox, program)
    assert first.passed, first  # a zygote is only a cache: nothing to charge
    assert_siblings_pass(siblings)
