"""Terminal domains through the episode runner, unchanged: a scripted engine plays a shell episode, and the
trajectory's loss mask covers exactly the sampled turns while the tool outputs are masked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from posttrain.envs.runner import EpisodeJob, EpisodeRunner
from posttrain.rollout import PromptRenderer, SamplingParams
from posttrain.rollout.api import GenerationRequest, RequestOutput, SampleOutput
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainRegistry
from posttrain.tasks.terminal.family import TerminalConfig, TerminalSource
from posttrain.verify.tool_calls import format_tool_call

DATA = Path(__file__).parents[1] / "tasks" / "data" / "terminal"


class ScriptedEngine:
    """Answers every request with the next scripted message (as tokens, then end of turn)."""

    def __init__(self, renderer: PromptRenderer, messages: Sequence[str]) -> None:
        self.renderer, self.messages = renderer, list(messages)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[RequestOutput]:
        outputs = []
        for request in requests:
            ids = self.renderer.encode_text(self.messages.pop(0)) + [self.renderer.end_of_turn_id]
            sample = SampleOutput(ids, [0.0] * len(ids), "stop")
            outputs.append(RequestOutput(request.request_id, list(request.prompt_ids), [sample]))
        return outputs

    def update_weights(self, state_dict: Any, version: int) -> None:
        del state_dict, version

    def stats(self) -> dict[str, float]:
        return {}


def test_a_terminal_episode_runs_through_the_runner(tokenizer: Any) -> None:
    registry = DomainRegistry([DomainEntry(family=TerminalConfig(sources=[TerminalSource(path=DATA)]))])
    task = TaskPool(registry, seed=0).get("terminal/harbor/shell@medium#sum-yaml")
    renderer = PromptRenderer(tokenizer)
    solve = format_tool_call("bash", {"command": "paste -sd+ nums.txt | bc > sum.txt && cat sum.txt"})
    engine = ScriptedEngine(renderer, [solve, format_tool_call("submit", {})])
    runner = EpisodeRunner(engine, renderer, SamplingParams(max_new_tokens=200), max_total_tokens=8192)  # type: ignore[arg-type]
    (result,) = runner.run([EpisodeJob(task, registry.environment(task.domain_id), 0, seed=0)])
    assert result.score.passed and result.score.details["end_reason"] == "submitted"
    trajectory = result.trajectory
    masked_text = renderer.decode(
        [t for t, m in zip(trajectory.token_ids, trajectory.loss_mask, strict=True) if m]
    )
    assert "paste -sd+" in masked_text and "42" not in masked_text  # the command's output is not trained on
