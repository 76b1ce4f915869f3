"""Engines and graders for the Ray pool tests, built inside Ray workers from picklable factories.

Faults are injected through files, because a worker shares nothing else with the test: a worker that
manages to delete `crash_flag` dies on the spot (`os._exit`, as a segfault or the OOM killer would end
it), so exactly one worker crashes per flag; `hold_dir` makes `generate` announce itself and wait for a
`release` file, so a test can kill a worker while it is busy.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from posttrain.rollout.api import Conversation, GenerationRequest, RequestOutput, SampleOutput
from posttrain.types import Score, Task
from posttrain.verify import ExecutorConfig, Grader
from posttrain.verify.configs import CodeTestsConfig


def crash_if_flagged(crash_flag: str | None) -> None:
    """Die now if this process is the one that removes `crash_flag`."""
    if crash_flag is None:
        return
    try:
        os.unlink(crash_flag)
    except FileNotFoundError:
        return
    os._exit(1)


class FakeEngine:
    """Samples are a function of the request and the loaded `bias` only: sample j of a request is
    `[seed + j + bias, len(prompt)]`, so any worker gives the same answer."""

    def __init__(self, crash_flag: str | None = None, hold_dir: str | None = None) -> None:
        self.crash_flag = crash_flag
        self.hold_dir = hold_dir
        self.bias = 0
        self.num_requests = 0

    def generate(self, requests: Sequence[GenerationRequest]) -> list[RequestOutput]:
        crash_if_flagged(self.crash_flag)
        self._hold()
        self.num_requests += len(requests)
        return [self.answer(r, self.bias) for r in requests]

    @staticmethod
    def answer(request: GenerationRequest, bias: int) -> RequestOutput:
        seed, size = request.params.seed or 0, len(request.prompt_ids)
        samples = [SampleOutput([seed + j + bias, size], [0.0, 0.0], "length") for j in range(request.params.n)]
        return RequestOutput(request.request_id, list(request.prompt_ids), samples)

    def update_weights(self, state_dict: Any, version: int | None = None) -> None:
        self.bias = int(state_dict["bias"])

    def stats(self) -> dict[str, float]:
        return {"requests": float(self.num_requests), "max_step_s": float(os.getpid() % 7)}

    def open_conversation(self) -> Conversation:
        return Conversation(self)

    def _hold(self) -> None:
        if self.hold_dir is None:
            return
        hold = Path(self.hold_dir)
        (hold / f"started-{os.getpid()}").write_text("")
        while not (hold / "release").exists():
            time.sleep(0.02)


def fake_engine(crash_flag: str | None = None, hold_dir: str | None = None) -> FakeEngine:
    return FakeEngine(crash_flag, hold_dir)


class FakeGrader:
    """`correct` when the response equals the task's answer, else `wrong`; details name the worker's pid.
    A response `hang` never returns."""

    def __init__(self, crash_flag: str | None = None) -> None:
        self.crash_flag = crash_flag

    def grade(self, pairs: Sequence[tuple[Task, str]]) -> list[Score]:
        crash_if_flagged(self.crash_flag)
        if any(response == "hang" for _, response in pairs):
            time.sleep(3600)
        return [Score.correct(pid=os.getpid()) if r == t.answer else Score.wrong(pid=os.getpid()) for t, r in pairs]

    def grade_turns(self, items: Sequence[tuple[Task, Sequence[str]]]) -> list[Score]:
        return self.grade([(task, "\n".join(turns)) for task, turns in items])

    def close(self) -> None:
        pass


def fake_grader(crash_flag: str | None = None) -> FakeGrader:
    return FakeGrader(crash_flag)


class SandboxKillingGrader:
    """A real `Grader` of `code/test` tasks (`code_tests`, in the sandbox) that, on the call that removes
    `kill_flag`, SIGKILLs the sandbox running a program while the program runs: it waits for a `sleep`
    process among its descendants, then kills the process group of the bubblewrap above it."""

    def __init__(self, kill_flag: str) -> None:
        configs = {"code/test": CodeTestsConfig(timeout_s=20.0)}
        self.grader = Grader(configs.__getitem__, ExecutorConfig(num_workers=0))
        self.kill_flag = kill_flag

    def grade(self, pairs: Sequence[tuple[Task, str]]) -> list[Score]:
        try:
            os.unlink(self.kill_flag)
        except FileNotFoundError:
            pass
        else:
            threading.Thread(target=_kill_sandbox_of_sleep, daemon=True).start()
        return self.grader.grade(pairs)

    def grade_turns(self, items: Sequence[tuple[Task, Sequence[str]]]) -> list[Score]:
        return self.grader.grade_turns(items)

    def close(self) -> None:
        self.grader.close()


def sandbox_killing_grader(kill_flag: str) -> SandboxKillingGrader:
    return SandboxKillingGrader(kill_flag)


def _kill_sandbox_of_sleep(timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        parents = _parents()
        sleepers = [p for p in _descendants(os.getpid(), parents) if _cmdline(p)[:1] == [b"sleep"]]
        for pid in sleepers:
            chain = _ancestors(pid, parents)
            sandboxes = [p for p in chain if _cmdline(p)[:1] and _cmdline(p)[0].endswith(b"bwrap")]
            if sandboxes:
                os.killpg(sandboxes[-1], signal.SIGKILL)  # the outermost bubblewrap: the sandbox's session
                return
        time.sleep(0.01)


def _parents() -> dict[int, int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def _descendants(root: int, parents: dict[int, int]) -> list[int]:
    return [pid for pid in parents if root in _ancestors(pid, parents)]


def _ancestors(pid: int, parents: dict[int, int]) -> list[int]:
    chain = []
    while pid in parents and parents[pid] not in (0, pid):
        pid = parents[pid]
        chain.append(pid)
    return chain


def _cmdline(pid: int) -> list[bytes]:
    try:
        return [part for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if part]
    except OSError:
        return []
