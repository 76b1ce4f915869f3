"""AheadProducer: one step ahead, weights deferred to the next job, errors surface, no thread left."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from posttrain.train.producer import AheadProducer


class Engine:
    """A fake engine: records which weights each step was made with, and checks no two calls overlap."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.version = 0
        self.delay_s = delay_s
        self.busy = threading.Lock()
        self.made: list[tuple[int, int]] = []  # (step, version)
        self.threads: set[str] = set()

    def make(self, step: int, version: int) -> tuple[int, int]:
        with self.busy:  # a second concurrent caller would fail to acquire it
            assert version == self.version
            time.sleep(self.delay_s)
            self.made.append((step, version))
            self.threads.add(threading.current_thread().name)
            return step, version

    def load(self, state: Any, version: int) -> None:
        if not self.busy.acquire(blocking=False):
            raise AssertionError("weights loaded during a generation")
        self.version = version
        self.busy.release()


def producer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("posttrain-producer")]


@pytest.mark.parametrize("delay_s", [0.0, 0.02])
def test_each_step_is_made_one_step_ahead_with_the_weights_posted_before_its_start(delay_s: float) -> None:
    engine = Engine(delay_s)
    producer = AheadProducer(engine.make, engine.load, version=0, num_steps=4)
    got = []
    for step in range(4):
        data, overlap_s = producer.collect(step)
        got.append(data)
        assert overlap_s >= 0.0
        producer.post_weights({"w": step + 1}, version=step + 1)
        producer.post_weights({"w": step + 1}, version=step + 1)  # posting twice: the latest wins, once
    producer.close()
    # Step 0 and step 1 both start before any update; step k >= 1 then uses the weights of step k - 1,
    # whatever the timing (delay 0 or 20 ms per job).
    assert got == [(0, 0), (1, 0), (2, 1), (3, 2)]
    assert engine.made == got and engine.threads == {next(iter(engine.threads))}
    assert next(iter(engine.threads)).startswith("posttrain-producer")
    assert producer_threads() == []


def test_drain_applies_pending_weights_and_keeps_the_step_made_ahead() -> None:
    engine = Engine(0.01)
    producer = AheadProducer(engine.make, engine.load, version=0, num_steps=3)
    assert producer.collect(0)[0] == (0, 0)
    producer.post_weights({}, version=1)
    producer.drain()  # evaluation / checkpoint point: step 1 finished, weights 1 loaded
    assert engine.version == 1 and producer.ready() == {1: (1, 0)}
    assert producer.collect(1)[0] == (1, 0)  # made with version 0 before the drain
    assert producer.collect(2)[0] == (2, 1)  # nothing pending any more: version 1 stays
    producer.close()


def test_restored_steps_are_collected_before_anything_is_made() -> None:
    engine = Engine()
    engine.version = 5
    producer = AheadProducer(engine.make, engine.load, version=5, num_steps=8)
    producer.restore({5: ("saved", 4)})
    assert producer.collect(5) == (("saved", 4), 0.0)
    assert producer.collect(6)[0] == (6, 5)
    producer.close()
    assert engine.made[0] == (6, 5)


def test_an_error_in_a_job_is_raised_in_the_caller_and_no_thread_is_left() -> None:
    def make(step: int, version: int) -> int:
        if step == 2:
            raise RuntimeError("verifier exploded")
        return step

    producer = AheadProducer(make, lambda state, version: None, version=0, num_steps=5)
    assert producer.collect(0)[0] == 0
    assert producer.collect(1)[0] == 1  # step 2 is being made (and fails) meanwhile
    with pytest.raises(RuntimeError, match="verifier exploded"):
        producer.collect(2)
    producer.close()
    assert producer_threads() == []


def test_an_error_surfaces_in_drain_too() -> None:
    def make(step: int, version: int) -> int:
        if step == 1:
            raise ValueError("bad batch")
        return step

    producer = AheadProducer(make, lambda state, version: None, version=0, num_steps=3)
    producer.collect(0)
    with pytest.raises(ValueError, match="bad batch"):
        producer.drain()
    producer.close()


def test_the_last_step_starts_nothing_more() -> None:
    engine = Engine()
    producer = AheadProducer(engine.make, engine.load, version=0, num_steps=2)
    producer.collect(0)
    producer.collect(1)
    producer.drain()
    assert [step for step, _ in engine.made] == [0, 1] and producer.ready() == {}
    producer.close()
