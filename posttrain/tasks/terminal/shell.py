"""The shell agent environment: an episode in a fork of the task's snapshot, graded by the task's tests.

The model runs commands as a `bash` tool call (`<tool_call>{"name": "bash", "arguments": {"command":
...}}</tool_call>`, answered by a `role: tool` message) or as fenced ```bash blocks (answered by one
`role: user` message); a message that is itself a script (it starts with `#!`) is run whole — that is
how a single `response` is graded (`posttrain score`). Each command runs in the episode's sandbox through
a wrapper that restores the previous command's exported variables and working directory and saves them
on exit (in `/tmp/.shell-state`), so `cd` and `export` persist; stderr is merged into stdout and the
output is cut to `max_output_chars` (head and tail). The episode ends on a `submit` call (its optional
`answer` is kept for the tests), on a message without a command (its text is the answer), at the turn,
command or length limits (`EpisodeLimits`), or when the task's wall-clock budget (`[agent]
timeout_sec`, the sum of the commands' times) is spent (`time_budget`).

Grading, after the episode (its processes are gone by then): `tests/` is unpacked into `/tmp/tests`
(the answer in `/tmp/tests/answer.txt`), the absolute `/logs` in the test files becomes a fresh
`/tmp/.verifier-logs/` (the root is read-only), `test.sh` runs in the task's WORKDIR with the task's
ENV; reward 1 when it exits 0 (or, where it writes Harbor's `reward.txt`, when that holds >= 1), else 0.
Any `sandbox_error` during the episode or the tests, and a task whose build failed, grade `Score.infra`.
Details: the commands with their exit codes, the test output's tail, the end reason, the answer.
Not here: building and snapshots (`build.py`), packages (`package.py`).
"""

from __future__ import annotations

import io
import re
import shlex
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from posttrain.envs.base import (
    COMPLETED,
    MAX_LENGTH,
    MAX_TOOL_CALLS,
    EpisodeLimits,
    EpisodeStats,
    Message,  # fmt: skip
    Observation,
    TurnLoop,
)
from posttrain.envs.tools import ToolsPrompt, render_tools
from posttrain.sandbox import ExecResult, Sandbox
from posttrain.sandbox.background import run_blocking
from posttrain.tasks.terminal.build import (
    DEFAULT_WARM,
    DEFAULT_WARM_TOTAL,
    TaskBuildError,
    TaskSnapshot,
    pack_dir,
    prepare,
)
from posttrain.tasks.terminal.package import TerminalPackage
from posttrain.types import Score, Task
from posttrain.verify.tool_calls import MalformedCall, ToolCall, format_tool_call, parse_tool_calls

SUBMITTED, TIME_BUDGET = "submitted", "time_budget"
STATE_DIR = "/tmp/.shell-state"
LOGS_DIR = "/tmp/.verifier-logs"
_LOGS = re.compile(rb"(?<![\w.~/-])/logs(?![\w.-])")
"""The absolute path `/logs` (Harbor's log root), not a `logs` directory elsewhere (`data/logs/x`)."""
TESTS_DIR = "/tmp/tests"
PLACE_TESTS = (
    # Whatever the episode left at these paths goes first: a planted reward file, tests of its own, a
    # symlink, directories it made read-only (it runs as the same user, so it cannot stop this). Any
    # failure here or in the unpacking (a disk it filled, /tmp made unwritable) is the episode's fault.
    f"chmod u+rwx /tmp 2>/dev/null; find {TESTS_DIR} {LOGS_DIR} -type d -exec chmod u+rwx {{}} + 2>/dev/null; "
    f"rm -rf {TESTS_DIR} {LOGS_DIR}; "
    f"if [ -e {TESTS_DIR} ] || [ -L {TESTS_DIR} ] || [ -e {LOGS_DIR} ] || [ -L {LOGS_DIR} ]; then exit 1; fi; "
    f"mkdir -p {TESTS_DIR} {LOGS_DIR}/verifier {LOGS_DIR}/agent && tar -x -C {TESTS_DIR}"
)
"""Run before the tests, as one command: clear both paths, make them anew and unpack the tests (stdin)."""
MAX_COMMAND_CHARS = 65536
_HOST_SLACK_S = 30.0
_FENCE = re.compile(r"```(?:bash|sh|shell)[ \t]*\n(.*?)```", re.DOTALL)

SYSTEM = ("You are working in a Linux shell (bash) inside an isolated machine without network access. "
          "Run commands with the bash tool; each call returns the command's output and exit code. The "
          "working directory and exported variables persist between commands; background processes do not. "
          "When the task is done, call submit (with your answer if the task asks a question).")  # fmt: skip
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "bash", "description": "Run a bash command and return its output and exit code.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string",
                       "description": "The command line (several lines allowed)."}}, "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "submit", "description": "Finish the task.",
        "parameters": {"type": "object", "properties": {"answer": {"type": "string",
                       "description": "Your answer, when the task asks a question."}}, "required": []}}},
]  # fmt: skip


def wrapper(workdir: str) -> str:
    """The bash program every command runs under (`$1` is the command)."""
    state, home = shlex.quote(STATE_DIR), shlex.quote(workdir)
    return (
        f"exec 2>&1\nif [ -f {state}/env ]; then . {state}/env; fi\n"
        f'cd "$(cat {state}/cwd 2>/dev/null || echo {home})" 2>/dev/null || cd {home}\n'
        f"__save() {{ mkdir -p {state}; export -p > {state}/env; pwd > {state}/cwd; }}\n"
        'trap __save EXIT\neval "$1"\n'
    )


def cap_output(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


def gold_turns(package: TerminalPackage) -> list[str]:
    """The oracle as an episode: solve.sh (after `[solution] env`) in one bash call, then submit (with
    `solution/answer.txt`)."""
    exports = "".join(
        f"export {key}={shlex.quote(value)}\n" for key, value in package.config.solution.env.items()
    )
    turns = [format_tool_call("bash", {"command": exports + package.solution})] if package.solution else []
    answer_file = package.root / "solution" / "answer.txt"
    answer = answer_file.read_text().strip() if answer_file.is_file() else ""
    return [*turns, format_tool_call("submit", {"answer": answer} if answer else {})]


@dataclass(frozen=True)
class ShellSettings:
    """How commands run and what the model sees of them."""

    max_output_chars: int = 4000
    """Characters of one command's output shown (head and tail kept)."""
    command_timeout_s: float = 30.0
    """Wall-clock limit of one command (the task's budget bounds the episode)."""
    tools_prompt: ToolsPrompt = "hermes"
    """How the system prompt lists the bash and submit tools."""
    max_warm: int = DEFAULT_WARM
    """Restored forks kept per task after episodes, for the next ones."""
    max_warm_total: int = DEFAULT_WARM_TOTAL
    """Restored forks kept across every task of the process."""


class TerminalEnv(TurnLoop):
    """One shell episode at a time; `fresh()` gives another instance for a concurrent one."""

    def __init__(self, package_of: Callable[[Task], TerminalPackage], limits: EpisodeLimits = EpisodeLimits(),
                 settings: ShellSettings = ShellSettings()) -> None:  # fmt: skip
        self.package_of, self.limits, self.settings = package_of, limits, settings
        self._snap: TaskSnapshot | None = None
        self._sandbox: Sandbox | None = None
        self._task: Task | None = None
        self._build_error = ""
        self._infra = ""
        self._used_s = 0.0
        self._budget_s = 0.0
        self.answer = ""
        self.commands: list[dict[str, Any]] = []
        self.stats = EpisodeStats()

    def fresh(self) -> TerminalEnv:
        return TerminalEnv(self.package_of, self.limits, self.settings)

    def reset(self, task: Task) -> Observation:
        self._release()
        package = self.package_of(task)
        self._task, self.stats, self.commands, self.answer = task, EpisodeStats(), [], ""
        self._infra, self._build_error, self._used_s, self._snap = "", "", 0.0, None
        self._budget_s = package.config.agent.timeout_sec
        try:
            self._snap = prepare(package)
            self._sandbox = run_blocking(self._snap.checkout(), _HOST_SLACK_S * 4)
        except TaskBuildError as exc:
            self._build_error = str(exc)
            self.stats.end_reason = "task_error"
        system = render_tools(self.settings.tools_prompt, TOOLS, SYSTEM)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": package.instruction}]
        self.stats.length = sum(self.limits.length(m["content"]) for m in messages)
        return Observation(messages, TOOLS)

    def _respond(self, text: str) -> list[Message]:
        if self._grow(text):
            return []
        calls = parse_tool_calls(text)
        if calls:
            return self._tool_calls(calls)
        blocks = _FENCE.findall(text) or ([text] if text.startswith("#!") else [])
        if not blocks:
            self.answer = text.strip()
            self.end(COMPLETED)
            return []
        outputs = []
        for block in blocks:
            if self.done:
                break
            outputs.append(self._command(block))
        message = {"role": "user", "content": "\n\n".join(outputs)}
        self._grow(message["content"])
        return [message]

    def _tool_calls(self, calls: list[ToolCall | MalformedCall]) -> list[Message]:
        new: list[Message] = []
        for call in calls:
            if self.done:
                break
            content = self._tool(call)
            new.append({"role": "tool", "content": content})
            if self._grow(content):
                break
        return new

    def _tool(self, call: ToolCall | MalformedCall) -> str:
        if isinstance(call, MalformedCall):
            self._count(ok=False)
            self.stats.malformed_calls += 1
            return f"Error: {call.error}"
        if call.name == "submit":
            self._count(ok=True)
            self.answer = str(call.arguments.get("answer", "")).strip()
            self.end(SUBMITTED)
            return "Submitted."
        command = call.arguments.get("command")
        if call.name != "bash" or not isinstance(command, str):
            self._count(ok=False)
            return 'Error: call bash with a string "command", or submit'
        return self._command(command)

    def _count(self, ok: bool) -> None:
        """One call or fenced block; reaching `max_tool_calls` ends the episode after it."""
        self.stats.tool_calls += 1
        self.stats.tool_calls_ok += ok
        self.stats.tool_errors += not ok
        if self.stats.tool_calls >= self.limits.max_tool_calls:
            self.end(MAX_TOOL_CALLS)

    def _command(self, command: str) -> str:
        self._count(ok=True)
        output = self._run(command)
        if self._used_s >= self._budget_s:
            self.stats.end_reason = (
                TIME_BUDGET  # the budget is spent: it, not a count limit, ended the episode
            )
        return output

    def _run(self, command: str) -> str:
        if len(command) > MAX_COMMAND_CHARS:
            return f"Error: the command is longer than {MAX_COMMAND_CHARS} characters"
        timeout_s = min(self.settings.command_timeout_s, self._budget_s - self._used_s)
        result = self._exec(
            ["bash", "-c", wrapper(self._workdir), "bash", command], b"", timeout_s, self._env
        )
        self._used_s += result.wall_ms / 1000
        self.commands.append(
            {"command": command[:500], "status": result.status, "exit_code": result.exit_code}
        )
        output = cap_output(result.stdout.decode(errors="replace"), self.settings.max_output_chars)
        if result.status == "timeout_wall":
            status = f"[timed out after {timeout_s:g} s]"
        else:
            status = (
                f"[exit code {result.exit_code}]" if result.exit_code is not None else f"[{result.status}]"
            )
        return f"{output.rstrip(chr(10))}\n{status}" if output.strip() else status

    @property
    def _workdir(self) -> str:
        return self._snap.workdir if self._snap is not None else "/workspace"

    @property
    def _env(self) -> dict[str, str]:
        return self._snap.env if self._snap is not None else {}

    def _exec(self, argv: list[str], stdin: bytes, timeout_s: float, env: dict[str, str]) -> ExecResult:
        assert self._sandbox is not None
        result = run_blocking(self._sandbox.exec(argv, stdin, timeout_s=max(timeout_s, 0.1), env=env),
                              timeout_s + _HOST_SLACK_S)  # fmt: skip
        if result.status == "sandbox_error" and not self._infra:
            self._infra = result.error or "sandbox_error"
            self.end("sandbox_error")
        return result

    def _grow(self, text: str) -> bool:
        self.stats.length += self.limits.length(text)
        if self.stats.length > self.limits.max_length:
            self.end(MAX_LENGTH)
        return self.done

    def grade(self) -> Score:
        if self._task is None:
            raise RuntimeError("grade() before reset()")
        try:
            score = self._test() if not self._build_error else Score.infra(f"task error: {self._build_error}")
        finally:
            self._release()
        details = {**self.stats.details(score.passed), "commands": self.commands, "answer": self.answer[:500]}
        return score.model_copy(update={"details": {**details, **score.details}})

    def _test(self) -> Score:
        if self._infra:
            return Score.infra(f"sandbox error during the episode: {self._infra}")
        package = self.package_of(self._task) if self._task is not None else None
        assert package is not None
        setup = self._exec(["bash", "-c", PLACE_TESTS], tests_archive(package, self.answer), 60.0, {})
        if setup.status == "sandbox_error":
            return Score.infra(f"sandbox error while placing the tests: {setup.error}")
        if not setup.ok:  # the episode's own doing: a full disk, a directory it made unwritable...
            output = (setup.stdout + setup.stderr)[-500:].decode(errors="replace")
            return Score.wrong(message="the episode left no room for the tests", test_status=setup.status,
                               test_output=output)
        verifier = package.config.verifier
        script = f"cd {shlex.quote(self._workdir)} && bash {TESTS_DIR}/test.sh"
        result = self._exec(["bash", "-c", script], b"", verifier.timeout_sec, {**self._env, **verifier.env})
        if result.status == "sandbox_error":
            return Score.infra(f"sandbox error while testing: {result.error}")
        passed = result.exit_code == 0
        reward_file = self._exec(["cat", f"{LOGS_DIR}/verifier/reward.txt"], b"", 10.0, {})
        if reward_file.ok:
            try:
                passed = float(reward_file.stdout.decode().strip()) >= 1.0
            except ValueError:
                passed = False
        tail = (result.stdout + result.stderr)[-1500:].decode(errors="replace")
        details: dict[str, Any] = {
            "test_status": result.status,
            "test_exit_code": result.exit_code,
            "test_output": tail,
        }
        return Score.correct(**details) if passed else Score.wrong(message="tests failed", **details)

    def _release(self) -> None:
        if self._sandbox is not None and self._snap is not None:
            sandbox, self._sandbox = self._sandbox, None
            run_blocking(self._snap.checkin(sandbox, self.settings.max_warm, self.settings.max_warm_total),
                         _HOST_SLACK_S)


def tests_archive(package: TerminalPackage, answer: str) -> bytes:
    """`tests/` as a tar archive with the absolute `/logs` rewritten to `LOGS_DIR` and the answer in `answer.txt`."""
    with tarfile.open(fileobj=io.BytesIO(pack_dir(package.tests_dir))) as source:
        members = [(m, source.extractfile(m).read() if m.isfile() else None) for m in source.getmembers()]  # type: ignore[union-attr]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for member, data in members:
            if data is not None:
                data = _LOGS.sub(LOGS_DIR.encode(), data)
                member.size = len(data)
            archive.addfile(member, io.BytesIO(data) if data is not None else None)
        raw = answer.encode()
        info = tarfile.TarInfo("answer.txt")
        info.size = len(raw)
        archive.addfile(info, io.BytesIO(raw))
    return out.getvalue()
