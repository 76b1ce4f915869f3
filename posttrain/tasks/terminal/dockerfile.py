"""The Dockerfile subset a terminal task may use, parsed into build steps.

```
FROM sandbox-base            # first instruction; a registered sandbox image (a `:tag` is ignored)
WORKDIR /workspace/sub       # absolute under /workspace, or relative to the current one
COPY src dst                 # src inside environment/, dst under /workspace (relative: to WORKDIR)
RUN shell command            # or RUN ["exec", "form"]
ENV KEY=value [K2=v2 ...]    # or ENV KEY value
```
Comments, blank lines and `\\` line continuations are read as Docker reads them. Guarantees: anything
else (another instruction, COPY flags, a path leaving the context or `/workspace`, a second FROM) is a
`ConfigError` naming the file and line; the result is pure data. Not here: executing it (`build.py`).
"""

from __future__ import annotations

import json
import posixpath
import shlex
from dataclasses import dataclass
from typing import Literal

from posttrain.errors import ConfigError
from posttrain.sandbox.images import ImageError, resolve

WORKSPACE = "/workspace"


@dataclass(frozen=True)
class BuildStep:
    """One executable instruction. RUN: `text` is the shell command; COPY: `src` (relative to the build
    context) and `dst` (absolute, under /workspace); `workdir` and `env` are in force for the step."""

    kind: Literal["RUN", "COPY"]
    line: int
    text: str
    workdir: str
    env: tuple[tuple[str, str], ...]
    src: str = ""
    dst: str = ""


@dataclass(frozen=True)
class BuildPlan:
    """The steps, and the WORKDIR and ENV in force at the end (where the agent starts)."""

    image: str
    steps: tuple[BuildStep, ...]
    workdir: str
    env: tuple[tuple[str, str], ...]


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, instruction) pairs: comments dropped, continuations joined."""
    lines: list[tuple[int, str]] = []
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not buffer and (not stripped or stripped.startswith("#")):
            continue
        if buffer and stripped.startswith("#"):
            continue
        if not buffer:
            start = number
        if stripped.endswith("\\"):
            buffer += stripped[:-1] + " "
            continue
        lines.append((start, buffer + stripped))
        buffer = ""
    if buffer.strip():
        lines.append((start, buffer.strip()))
    return lines


def parse_dockerfile(text: str, name: str = "Dockerfile") -> BuildPlan:
    """Parse the subset; every error names `name:<line>`."""
    image: str | None = None
    workdir, env = WORKSPACE, dict[str, str]()
    steps: list[BuildStep] = []
    for line, instruction in _logical_lines(text):
        where = f"{name}:{line}"
        keyword, _, rest = instruction.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if image is None and keyword != "FROM":
            raise ConfigError(f"{where}: the first instruction must be FROM <sandbox image>")
        if keyword == "FROM":
            if image is not None:
                raise ConfigError(f"{where}: only one FROM is supported (no multi-stage builds)")
            image = _image(rest, where)
        elif keyword == "WORKDIR":
            workdir = _inside_workspace(posixpath.join(workdir, _words(rest, where, 1)[0]), where, "WORKDIR")
        elif keyword == "ENV":
            env.update(_env_pairs(rest, where))
        elif keyword == "RUN":
            steps.append(BuildStep("RUN", line, _run_text(rest, where), workdir, tuple(env.items())))
        elif keyword == "COPY":
            src, dst = _copy_paths(rest, where, workdir)
            steps.append(BuildStep("COPY", line, rest, workdir, tuple(env.items()), src, dst))
        else:
            raise ConfigError(f"{where}: {keyword} is not supported (only FROM, WORKDIR, COPY, RUN and ENV)")
    if image is None:
        raise ConfigError(f"{name}: no FROM instruction")
    return BuildPlan(image, tuple(steps), workdir, tuple(env.items()))


def _image(rest: str, where: str) -> str:
    words = _words(rest, where, 1)
    try:
        resolve(words[0])
    except ImageError as exc:
        raise ConfigError(
            f"{where}: FROM {words[0]}: {exc} (only registered sandbox images, no registry)"
        ) from None
    return words[0]


def _words(rest: str, where: str, count: int) -> list[str]:
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if len(words) != count:
        raise ConfigError(f"{where}: expected {count} argument(s), got {len(words)}")
    return words


def _inside_workspace(path: str, where: str, what: str) -> str:
    path = posixpath.normpath(path)
    if path != WORKSPACE and not path.startswith(WORKSPACE + "/"):
        raise ConfigError(
            f"{where}: {what} {path} is outside {WORKSPACE} (the only directory kept by the build)"
        )
    return path


def _env_pairs(rest: str, where: str) -> dict[str, str]:
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if words and "=" not in words[0]:
        if len(words) < 2:
            raise ConfigError(f"{where}: ENV needs KEY=value or KEY value")
        return {words[0]: rest.split(None, 1)[1].strip()}
    pairs = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key.isidentifier():
            raise ConfigError(f"{where}: ENV {word!r} is not KEY=value")
        pairs[key] = value
    return pairs


def _run_text(rest: str, where: str) -> str:
    if not rest:
        raise ConfigError(f"{where}: RUN needs a command")
    if rest.startswith("["):
        try:
            argv = json.loads(rest)
        except ValueError:
            argv = None
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ConfigError(f"{where}: RUN [...] must be a JSON list of strings")
        return shlex.join(argv)
    return rest


def _copy_paths(rest: str, where: str, workdir: str) -> tuple[str, str]:
    if rest.startswith("--"):
        raise ConfigError(f"{where}: COPY flags ({rest.split()[0]}) are not supported")
    src, dst = _words(rest, where, 2)
    normal = posixpath.normpath(src)
    if normal.startswith("/") or normal == ".." or normal.startswith("../"):
        raise ConfigError(f"{where}: COPY source {src} is outside the build context (environment/)")
    target = _inside_workspace(posixpath.join(workdir, dst), where, "COPY destination")
    return normal, target + ("/" if dst.endswith("/") else "")
