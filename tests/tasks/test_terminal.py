"""Terminal task packages: loading, the Dockerfile subset, builds + snapshots, the shell agent, grading."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from posttrain.envs.base import run_scripted
from posttrain.errors import ConfigError
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainRegistry
from posttrain.tasks.terminal.dockerfile import parse_dockerfile
from posttrain.tasks.terminal.family import TerminalConfig, TerminalSource
from posttrain.tasks.terminal.package import load_package
from posttrain.tasks.terminal.shell import cap_output, gold_turns
from posttrain.tasks.validate import validate_domain
from posttrain.types import Task
from posttrain.verify import ExecutorConfig
from posttrain.verify.tool_calls import format_tool_call

DATA = Path(__file__).parent / "data" / "terminal"


def bash(command: str) -> str:
    return format_tool_call("bash", {"command": command})


def registry(path: Path = DATA) -> DomainRegistry:
    return DomainRegistry(
        [DomainEntry(family=TerminalConfig(sources=[TerminalSource(path=path, name="examples")]))]
    )


def task_of(reg: DomainRegistry, task_id: str) -> Task:
    return TaskPool(reg, seed=0).get(task_id)


MAKE_FILE = "terminal/examples/files@easy#make-file"
COUNT_LINES = "terminal/examples/files@easy#count-lines"
SUM_YAML = "terminal/examples/shell@medium#sum-yaml"


def write_package(root: Path, toml: str, dockerfile: str | None = None, test: str = "true\n") -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "task.toml").write_text(toml)
    (root / "instruction.md").write_text("Do it.")
    (root / "tests" / "test.sh").write_text(test)
    if dockerfile is not None:
        (root / "environment").mkdir()
        (root / "environment" / "Dockerfile").write_text(dockerfile)
    return root


# --- packages and the Dockerfile subset (pure) ---


def test_task_toml_and_task_yaml_load_onto_one_model() -> None:
    toml = load_package(DATA / "files" / "make-file")
    assert (toml.family, toml.level, toml.spec.memory_mb, toml.spec.disk_mb) == ("files", "easy", 256, 32)
    assert toml.spec.network == "none" and toml.config.metadata.model_extra == {"author_name": "posttrain"}
    yaml = load_package(DATA / "shell" / "sum-yaml")
    assert (yaml.family, yaml.level, yaml.spec.memory_mb, yaml.config.agent.timeout_sec) == (
        "shell",
        "medium",
        256,
        60,
    )


HARBOR_TOML = """version = "1.0"
source = "example-dataset"

[metadata]
author_name = "A. Author"
difficulty = "hard"
category = "programming"
tags = ["trivial"]

[verifier]
timeout_sec = 120.0
env = { MODE = "strict" }

[agent]
timeout_sec = 300.0

[solution]
env = { TOKEN = "a b" }

[environment]
build_timeout_sec = 600.0
cpus = 2
memory = "1Gi"
storage = "100Mi"
allow_internet = false
"""


def test_every_documented_harbor_key_is_read(tmp_path: Path) -> None:
    root = write_package(tmp_path / "t", HARBOR_TOML)
    (root / "solution").mkdir()
    (root / "solution" / "solve.sh").write_text('echo "$TOKEN" > out.txt\n')
    package = load_package(root)
    assert (package.level, package.family, package.config.source) == (
        "hard",
        "programming",
        "example-dataset",
    )
    assert (package.spec.cpus, package.spec.memory_mb, package.spec.disk_mb) == (2, 1024, 100)
    assert package.config.verifier.env == {"MODE": "strict"} and package.spec.timeout_s == 300
    assert "export TOKEN='a b'" in gold_turns(package)[0]


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[agent]\ntimeout_sec = 5\nspeed = 1\n", "agent.speed: unknown key"),
        ("[environment]\nallow_internet = true\n", "allow_internet = true is not supported"),
        ("[environment]\nmemory_mb = true\n", "environment.memory_mb"),
        ('[environment]\ndocker_image = "ubuntu:22.04"\n', "environment.docker_image"),
        ("[metadata\n", "invalid TOML"),
    ],
)
def test_bad_task_toml_names_file_and_key(tmp_path: Path, toml: str, expected: str) -> None:
    root = write_package(tmp_path / "t", toml)
    with pytest.raises(ConfigError) as info:
        load_package(root)
    assert expected in str(info.value) and "task.toml" in str(info.value)


def test_dockerfile_subset_parses_continuations_env_and_workdir() -> None:
    plan = parse_dockerfile("# c\nFROM sandbox-base:latest\nWORKDIR app\nENV A=1 B='x y'\nENV C two words\n"
                            "COPY src/ lib/\nRUN echo a && \\\n    echo b\nRUN [\"touch\", \"f g\"]\n")  # fmt: skip
    assert plan.workdir == "/workspace/app" and dict(plan.env) == {"A": "1", "B": "x y", "C": "two words"}
    copy, run, exec_form = plan.steps
    assert (copy.src, copy.dst, copy.line) == ("src", "/workspace/app/lib/", 6)
    assert run.text == "echo a &&  echo b" and run.line == 7 and exec_form.text == "touch 'f g'"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("FROM sandbox-base\nEXPOSE 80\n", "Dockerfile:2: EXPOSE is not supported"),
        ("RUN true\n", "Dockerfile:1: the first instruction must be FROM"),
        ("FROM ubuntu:22.04\n", "Dockerfile:1: FROM ubuntu:22.04"),
        ("FROM sandbox-base\nWORKDIR /etc\n", "Dockerfile:2: WORKDIR /etc is outside /workspace"),
        ("FROM sandbox-base\nCOPY ../x y\n", "Dockerfile:2: COPY source ../x is outside"),
        ("FROM sandbox-base\nCOPY --chown=1 a b\n", "Dockerfile:2: COPY flags"),
        ("FROM sandbox-base\nCOPY a /tmp/a\n", "Dockerfile:2: COPY destination /tmp/a is outside"),
        ("FROM sandbox-base\nFROM sandbox-base\n", "Dockerfile:2: only one FROM"),
    ],
)
def test_dockerfile_outside_the_subset_is_an_error_naming_the_line(text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        parse_dockerfile(text)


def test_cap_output_keeps_head_and_tail() -> None:
    text = "a" * 50 + "b" * 50
    capped = cap_output(text, 20)
    assert capped.startswith("a" * 10) and capped.endswith("b" * 10) and "80 characters omitted" in capped


def test_a_broken_package_is_reported_not_fatal(tmp_path: Path) -> None:
    shutil.copytree(DATA, tmp_path / "set")
    (tmp_path / "set" / "files" / "make-file" / "task.toml").write_text("[agent]\nbogus = 1\n")
    reg = registry(tmp_path / "set")
    assert any("bogus" in p for p in reg.problems)
    assert reg.get("terminal/examples/files@easy").spec.size == 1


# --- episodes in sandboxes ---


def test_every_example_domain_validates() -> None:
    """Oracle scores 1, an empty and a garbage episode 0, each graded twice with equal results."""
    pool = TaskPool(registry(), seed=0)
    for domain_id in pool.registry.ids():
        check = validate_domain(pool, domain_id, num_tasks=5)
        assert check.ok, check.failures


def test_cd_and_export_persist_between_commands_and_output_is_truncated() -> None:
    reg = registry()
    task = task_of(reg, MAKE_FILE)
    env = reg.environment(task.domain_id)
    assert env is not None
    turns = [bash("cd out && export WHO=world"), bash("pwd; echo $WHO $GREETING"), bash("seq 1 5000")]
    transcript, score = run_scripted(env, task, turns)
    outputs = [m["content"] for m in transcript if m["role"] == "tool"]
    assert outputs[0] == "[exit code 0]" and outputs[1] == "/workspace/out\nworld hello\n[exit code 0]"
    assert "characters omitted" in outputs[2] and outputs[2].endswith("5000\n[exit code 0]")
    assert score.reward == 0.0 and [c["exit_code"] for c in score.details["commands"]] == [0, 0, 0]


def test_fenced_bash_blocks_and_a_script_response_are_run() -> None:
    reg = registry()
    task = task_of(reg, SUM_YAML)
    block = "I will sum them.\n```bash\npaste -sd+ nums.txt | bc > sum.txt\n```"
    assert reg.score_episode(task, [block]).passed
    with reg.grader(ExecutorConfig(num_workers=0)) as grader:
        script, prose = grader.grade(
            [(task, "#!/bin/bash\npaste -sd+ nums.txt | bc > sum.txt\n"), (task, "42")]
        )
    assert script.passed and script.details["end_reason"] == "policy_out_of_turns"
    assert not prose.passed and prose.details["commands"] == []


def test_submitted_answer_reaches_the_tests_and_the_agent_cannot_see_them() -> None:
    reg = registry()
    task = task_of(reg, COUNT_LINES)
    turns = [
        bash("ls /tmp/tests 2>&1; echo 17 > /tmp/tests/answer.txt"),
        format_tool_call("submit", {"answer": "16"}),
    ]
    transcript, score = run_scripted(reg.environment(task.domain_id), task, turns)  # type: ignore[arg-type]
    assert "No such file" in transcript[3]["content"]
    assert not score.passed and score.details["answer"] == "16" and score.details["end_reason"] == "submitted"
    assert reg.score_episode(task, [format_tool_call("submit", {"answer": "17"})]).passed


def test_episode_writes_never_reach_another_episode() -> None:
    """Sequential episodes (a warm fork restored), and concurrent ones (separate forks of one snapshot)."""
    reg = registry()
    task = task_of(reg, SUM_YAML)
    solve = bash("paste -sd+ nums.txt | bc > sum.txt; echo x > /tmp/leak")
    probe = bash("ls; ls /tmp; cat sum.txt")
    assert reg.score_episode(task, [solve]).passed
    transcript, score = run_scripted(reg.environment(task.domain_id), task, [probe])  # type: ignore[arg-type]
    assert "sum.txt" not in transcript[2]["content"].split("\n")[0] and "leak" not in transcript[2]["content"]
    assert not score.passed
    results: dict[int, bool] = {}

    def episode(i: int) -> None:
        turns = [solve] if i % 2 == 0 else [bash("sleep 0.2")]
        results[i] = reg.score_episode(task, turns).passed

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {i: i % 2 == 0 for i in range(6)}


def test_a_failed_build_is_a_task_error_never_a_model_failure(tmp_path: Path) -> None:
    root = write_package(tmp_path / "set" / "broken" / "bad-run", "[metadata]\ndifficulty = \"hard\"\n",
                         "FROM sandbox-base\nRUN true\nRUN echo oops >&2; exit 3\n")  # fmt: skip
    reg = registry(tmp_path / "set")
    task = task_of(reg, "terminal/examples/broken@hard#bad-run")
    score = reg.score_episode(task, [bash("true")])
    assert (
        score.is_infra_failure
        and f"{root}/environment/Dockerfile:3" in score.message
        and "oops" in score.message
    )


def test_the_command_budget_and_a_timeout_end_the_episode(tmp_path: Path) -> None:
    write_package(tmp_path / "set" / "slow" / "budget", "[agent]\ntimeout_sec = 1.5\n")
    reg = registry(tmp_path / "set")
    task = task_of(reg, "terminal/examples/slow@medium#budget")
    transcript, score = run_scripted(
        reg.environment(task.domain_id), task, [bash("sleep 5"), bash("echo never")]
    )  # type: ignore[arg-type]
    assert "timed out" in transcript[3]["content"] and len(transcript) == 4
    assert score.details["end_reason"] == "time_budget"
    assert score.passed  # the package's test is `true`: the budget ends the episode, grading still runs


def test_background_processes_do_not_outlive_their_command_or_episode() -> None:
    reg = registry()
    task = task_of(reg, SUM_YAML)
    turns = [bash("(sleep 30 > /dev/null &) ; echo started"), bash("ps -e -o comm= | grep -c sleep || true")]
    transcript, _ = run_scripted(reg.environment(task.domain_id), task, turns)  # type: ignore[arg-type]
    assert transcript[5]["content"].startswith("0\n")


def test_agentbench_entries_convert_and_only_validating_ones_are_kept(tmp_path: Path) -> None:
    from posttrain.tasks.terminal.agentbench import convert

    data = tmp_path / "data"
    (data / "scripts" / "check").mkdir(parents=True)
    (data / "scripts" / "check" / "integer-match.py").write_text(
        "import sys\nsys.exit(0 if int(sys.argv[1]) == int(sys.argv[2]) else 1)\n"
    )
    entries = [
        {"id": 0, "description": "How many files are in /home/agent/d?",
         "create": {"init": {"code": "mkdir -p /home/agent/d && touch /home/agent/d/a /home/agent/d/b"}},
         "evaluation": {"check": [None, {"language": "python", "file": "check/integer-match.py"}],
                        "example": {"code": "ls /home/agent/d | wc -l"}}},
        {"id": 1, "description": "What is 6*7?", "evaluation": {"match": "42"}},
        {"id": 2, "description": "Make /home/agent/x executable.", "create": {"init": {"code": "touch /home/agent/x"}},
         "evaluation": {"check": {"code": "test -x /home/agent/x"}, "example": {"code": "chmod +x /home/agent/x"}}},
        {"id": 3, "description": "Interval?", "start": "python3 -c 'pass' &", "evaluation": {"match": "1"}},
        {"id": 4, "description": "Add a user.", "create": {"init": {"code": "useradd jack"}},
         "evaluation": {"check": {"code": "id jack"}, "example": {"code": "true"}}},
        {"id": 5, "description": "Init file.", "create": {"init": {"file": "init/missing.sh"}},
         "evaluation": {"match": "1"}},
        {"id": 6, "description": "Extra packages.", "create": {"local": "packages"}, "evaluation": {"match": "1"}},
    ]  # fmt: skip
    (data / "agent_bench_os.json").write_text(json.dumps(entries))
    report = convert(tmp_path / "out", data).as_dict()
    assert report["packages"] == ["agent-bench-os-0", "agent-bench-os-1", "agent-bench-os-2"]
    assert report["reasons"] == {"background start process": 1, "init file not in the data": 1,
                                 "docker-only image 'packages'": 1,
                                 "setup does not run here (root, network or missing tools)": 1}  # fmt: skip
    kept = tmp_path / "out" / "agentbench" / "agent-bench-os-0"
    assert (kept / "solution" / "answer.txt").read_text() == "2\n"
    assert "/workspace/d" in (kept / "instruction.md").read_text()


def test_tool_errors_and_command_limits_are_counted() -> None:
    reg = DomainRegistry(
        [
            DomainEntry(
                family=TerminalConfig(sources=[TerminalSource(path=DATA, name="examples")], max_commands=4)
            )
        ]
    )
    task = task_of(reg, SUM_YAML)
    turns = [
        format_tool_call("ls", {}),
        "<tool_call>{bad</tool_call>",
        "```bash\necho 1\n```\n```sh\necho 2\n```",
    ]
    transcript, score = run_scripted(reg.environment(task.domain_id), task, turns)  # type: ignore[arg-type]
    assert transcript[-1] == {"role": "user", "content": "1\n[exit code 0]\n\n2\n[exit code 0]"}
    counts = {k: score.details[k] for k in ("tool_calls", "tool_calls_ok", "tool_errors", "malformed_calls")}
    assert counts == {"tool_calls": 4, "tool_calls_ok": 2, "tool_errors": 2, "malformed_calls": 1}
    assert score.details["end_reason"] == "max_tool_calls"


def test_only_the_absolute_logs_root_is_rewritten_in_the_tests() -> None:
    from posttrain.tasks.terminal.shell import _LOGS

    text = b'mkdir -p /logs/verifier; echo 1 > "/logs/verifier/reward.txt"; grep x data/logs/a.log ~/logs /logs-x\n'
    assert _LOGS.sub(b"/tmp/L", text) == (
        b'mkdir -p /tmp/L/verifier; echo 1 > "/tmp/L/verifier/reward.txt"; grep x data/logs/a.log ~/logs /logs-x\n'
    )


# --- the agent as an adversary: nothing it leaves behind passes the tests or reads as infra ---

PLANTED_REWARD = ("mkdir -p /tmp/.verifier-logs/verifier && echo 1 > /tmp/.verifier-logs/verifier/reward.txt && "
                  "chmod 555 /tmp/.verifier-logs/verifier /tmp/.verifier-logs")
PLANTED_TESTS = "mkdir -p /tmp/tests && printf 'exit 0\\n' > /tmp/tests/test.sh && chmod 555 /tmp/tests"


@pytest.mark.parametrize("hack", [
    PLANTED_REWARD,                                              # a reward file the grader cannot delete
    PLANTED_TESTS,                                               # tests of its own, in a read-only dir
    "ln -s /workspace /tmp/tests",                               # the tests dir as a symlink
    "head -c 100M /dev/zero > /tmp/fill; head -c 100M /dev/zero > fill",  # no room left for the tests
    "exec 1>&-; kill -9 $$",                                     # its own shell killed
    ":(){ :|:& };:",                                             # fork bomb
    "while true; do :; done",                                    # infinite loop (the command times out)
    "head -c 3000000 /dev/urandom",                              # binary garbage, far beyond the output cap
    "chmod -R 000 /workspace /tmp",                              # nothing readable
], ids=["planted_reward", "planted_tests", "symlinked_tests", "disk_full", "self_kill", "fork_bomb",
        "infinite_loop", "binary_garbage", "chmod_000"])
def test_a_hacking_episode_fails_as_the_model_never_as_infra(hack: str) -> None:
    reg = registry()
    task = task_of(reg, COUNT_LINES)  # the answer is the line count: doing nothing fails
    transcript, score = run_scripted(reg.environment(task.domain_id), task,  # type: ignore[arg-type]
                                     [bash(hack), format_tool_call("submit", {"answer": "0"})])
    assert not score.passed and not score.is_infra_failure, (score, transcript[-3:])
    assert reg.score_episode(task, [format_tool_call("submit", {"answer": "17"})]).passed  # the slot is clean again


def test_warm_forks_are_capped_across_tasks() -> None:
    from posttrain.tasks.terminal import build

    reg = DomainRegistry([DomainEntry(family=TerminalConfig(
        sources=[TerminalSource(path=DATA, name="capped")], warm_forks=4, warm_forks_total=1))])
    pool = TaskPool(reg, seed=0)
    tasks = [pool.get(MAKE_FILE.replace("examples", "capped")), pool.get(SUM_YAML.replace("examples", "capped"))]
    before = build._WarmForks.count
    for task in tasks:
        assert not reg.score_episode(task, [bash("true")]).passed
    # Without the cap each task would keep its fork: before + 2.
    assert build._WarmForks.count <= max(before, 1)
