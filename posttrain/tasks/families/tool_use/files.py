"""File-system family: reads, copies and moves over a simulated file system (`agent/tools/files@<level>`).

The file system is a dict path -> text (no real files; directories are path prefixes). easy: report a
file's text (read); medium: copy a file into another directory (read, write); hard: move every .tmp file
of a directory to /trash and report the text of its .txt file (ls, move, move, read). Distractor files:
3 / 5 / 7.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from posttrain.tasks.families.tool_use.common import (
    ANSWER_FORMAT,
    FamilySpec,
    Generated,
    Plan,
    State,
    ToolError,
)

DIRS = ("/docs", "/notes", "/work", "/inbox", "/logs")
STEMS = ("plan", "todo", "memo", "log", "draft", "list", "data", "idea", "cache", "old")
WORDS = ("buy milk", "call bob", "fix bug", "ship it", "read book", "pay rent", "walk dog", "send mail")
_NUM_FILES = {"easy": 3, "medium": 5, "hard": 7}


def tools(state: State) -> list[Callable[..., Any]]:
    def ls(dir: str) -> list[str]:
        """List the file names in a directory.

        Args:
            dir: The directory, e.g. /docs.
        """
        prefix = dir.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in state if p.startswith(prefix) and "/" not in p[len(prefix):])

    def read(path: str) -> str:
        """Read a file.

        Args:
            path: The file path.
        """
        if path not in state:
            raise ToolError(f"no file {path!r}")
        return str(state[path])

    def write(path: str, text: str) -> str:
        """Write a file, replacing it if it exists.

        Args:
            path: The file path.
            text: The new text.
        """
        state[path] = text
        return "ok"

    def move(src: str, dst: str) -> str:
        """Move a file to a new path.

        Args:
            src: The file path.
            dst: The new file path.
        """
        if src not in state:
            raise ToolError(f"no file {src!r}")
        if dst in state:
            raise ToolError(f"{dst!r} exists")
        state[dst] = state.pop(src)
        return "ok"

    return [ls, read, write, move]


def _random_files(rng: random.Random, count: int, taken: State) -> None:
    while count:
        path = f"{rng.choice(DIRS)}/{rng.choice(STEMS)}.txt"
        if path not in taken:
            taken[path], count = rng.choice(WORDS), count - 1


def generate(rng: random.Random, level: str) -> Generated:
    state: State = {}
    _random_files(rng, _NUM_FILES[level], state)
    path = rng.choice(sorted(state))
    if level == "easy":
        return Generated(f"What does {path} say? {ANSWER_FORMAT}", state, [("read", {"path": path})], state[path])
    if level == "medium":
        target = rng.choice([d for d in DIRS if not path.startswith(d + "/")])
        dst = f"{target}/{path.rsplit('/', 1)[1]}"
        state.pop(dst, None)
        copy: Plan = [("read", {"path": path}), ("write", {"path": dst, "text": state[path]})]
        return Generated(f"Copy {path} into {target}.", state, copy)
    home = "/tmp" + rng.choice(["a", "b", "c"])
    stems = rng.sample(STEMS, 3)
    tmps = [f"{home}/{stem}.tmp" for stem in stems[:2]]
    note = f"{home}/{stems[2]}.txt"
    for tmp in tmps:
        state[tmp] = rng.choice(WORDS)
    state[note] = rng.choice(WORDS)
    plan: Plan = [("ls", {"dir": home})]
    plan += [("move", {"src": tmp, "dst": "/trash/" + tmp.rsplit("/", 1)[1]}) for tmp in sorted(tmps)]
    plan.append(("read", {"path": note}))
    prompt = f"Move every .tmp file in {home} to /trash, then tell me what the .txt file in {home} says. {ANSWER_FORMAT}"
    return Generated(prompt, state, plan, state[note])


SPEC = FamilySpec("files", "You manage the user's files.", generate, tools)
