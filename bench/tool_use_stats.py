"""Shape of the tool-use domains: mean gold turns and tool calls, and rendered prompt length, per domain.

`python bench/tool_use_stats.py [--tasks 100] [--seed 0]`: generates tasks of every `agent/tools/*`
domain, replays each task's gold turns (asserting they pass) and prints the means per domain and per
level. Prompt length is the characters of the opening messages (system with tool schemas, then user).
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from posttrain.envs.base import run_scripted
from posttrain.tasks.base import GOLD_TURNS
from posttrain.tasks.families.tool_use import ToolUseConfig, ToolUseFamily


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    family = ToolUseFamily(ToolUseConfig())
    per_level: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for domain in family.domains():
        turns = calls = chars = 0
        for index in range(args.tasks):
            task = family.task(domain, index, args.seed)
            chars += sum(len(m["content"]) for m in family.environment(domain).reset(task).messages)
            score = run_scripted(family.environment(domain), task, task.metadata[GOLD_TURNS])[1]
            assert score.passed, task.id
            turns, calls = turns + score.details["turns"], calls + score.details["tool_calls"]
        n = args.tasks
        print(f"{domain.id:32s} prompt_chars={chars / n:6.0f} gold_turns={turns / n:4.2f} tool_calls={calls / n:4.2f}")
        totals = per_level[domain.level or ""]
        totals[0], totals[1], totals[2] = totals[0] + turns / n, totals[1] + calls / n, totals[2] + 1
    for level, (turns_sum, calls_sum, count) in per_level.items():
        print(f"level {level}: mean gold turns {turns_sum / count:.2f}, tool calls {calls_sum / count:.2f}")


if __name__ == "__main__":
    main()
