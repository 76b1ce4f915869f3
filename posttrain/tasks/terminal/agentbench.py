"""AgentBench OS tasks converted into terminal task packages.

Reads only the data files of the installed `inspect_evals` package (found with `find_spec`, never
imported): `agent_bench/data/agent_bench_os*.json` and `data/scripts/`. Per entry: `instruction.md` =
the description; `environment/setup.sh` = the init code (or script); `solution/solve.sh` = the example;
`tests/test.sh` from the evaluation — `match`: the submitted answer must equal the expected string;
`check: [null, <script>]`: the script compares the submitted answer with the example's output on the
final state (the oracle's answer is that output, computed once at conversion); `check: <script>`: the
script must exit 0 on the final state. `/home/agent` and `/root` are rewritten to `/workspace` (the
agent's home here). An entry is kept only when it converts (no background `start` process, no init file
missing from the data), its setup builds here (no root, no network, no docker-only image) and the
converted package validates (`validate.py`); every drop is counted with its reason.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posttrain.errors import ConfigError
from posttrain.sandbox.background import run_blocking
from posttrain.tasks.terminal.build import TaskBuildError, TaskSnapshot, prepare
from posttrain.tasks.terminal.package import load_package
from posttrain.tasks.terminal.validate import check_package

FILES = ("agent_bench_os.json", "agent_bench_os_test.json")
TOML = '[metadata]\ndifficulty = "{level}"\ncategory = "agentbench"\ntags = {tags}\nsource = "{source}"\n\n' \
       "[agent]\ntimeout_sec = 120.0\n\n[verifier]\ntimeout_sec = 30.0\n"  # fmt: skip


class Unsupported(ValueError):
    """An entry that cannot run here; the message is the drop reason."""


@dataclass
class ConversionReport:
    kept: list[str] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        total = len(self.kept) + sum(self.dropped.values())
        return {"entries": total, "kept": len(self.kept), "dropped": sum(self.dropped.values()),
                "reasons": dict(self.dropped.most_common()), "packages": self.kept}  # fmt: skip


def data_dir() -> Path:
    spec = importlib.util.find_spec("inspect_evals")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("inspect_evals is not installed (make setup installs its data files)")
    return Path(next(iter(spec.submodule_search_locations))) / "agent_bench" / "data"


def _local(text: str) -> str:
    return text.replace("/home/agent", "/workspace").replace("/root", "/workspace")


def _script(item: Any, scripts: Path, what: str) -> str:
    """The shell text of an init/example/check item: a string, {code}, or {file} under scripts/."""
    if isinstance(item, str):
        return _local(item)
    if isinstance(item, dict) and isinstance(item.get("code"), str):
        return _local(item["code"])
    if isinstance(item, dict) and isinstance(item.get("file"), str):
        path = scripts / item["file"]
        if not path.is_file():
            raise Unsupported(f"{what} file not in the data")
        text = _local(path.read_text())
        return (
            text if item.get("language", "bash") == "bash" else f"python3 - \"$@\" <<'PYEOF'\n{text}\nPYEOF"
        )
    raise Unsupported(f"{what} of an unknown shape")


def _files(entry: dict[str, Any], scripts: Path) -> dict[str, str]:
    if entry.get("start"):
        raise Unsupported("background start process")
    create = entry.get("create") or {}
    if not isinstance(create, dict) or create.get("init_at_start"):
        raise Unsupported("create of an unknown shape")
    if create.get("local") not in (None, "default"):
        raise Unsupported(f"docker-only image {create['local']!r}")
    files = {"instruction.md": _local(entry["description"]).strip() + "\n"}
    if create.get("init") is not None:
        files["environment/setup.sh"] = _script(create["init"], scripts, "init") + "\n"
    evaluation = entry["evaluation"]
    example = evaluation.get("example")
    if example is not None:
        files["solution/solve.sh"] = _script(example, scripts, "example") + "\n"
    answer = 'answer="$(cat /tmp/tests/answer.txt)"\n'
    if "match" in evaluation and isinstance(evaluation["match"], str):
        files["solution/answer.txt"] = evaluation["match"] + "\n"
        files["tests/test.sh"] = answer + f'[ "$answer" = {json.dumps(evaluation["match"])} ]\n'
        return files
    check = evaluation.get("check")
    if isinstance(check, list) and len(check) == 2 and check[0] is None and example is not None:
        files["tests/check.sh"] = _script(check[1], scripts, "check") + "\n"
        files["tests/example.sh"] = files["solution/solve.sh"]
        files["tests/test.sh"] = answer + 'expected="$(bash /tmp/tests/example.sh)"\n' \
                                          'bash /tmp/tests/check.sh "$answer" "$expected"\n'  # fmt: skip
        return files
    if isinstance(check, dict) and example is not None:
        files["tests/test.sh"] = _script(check, scripts, "check") + "\n"
        return files
    raise Unsupported("evaluation of an unsupported shape")


def _write(root: Path, files: dict[str, str], entry: dict[str, Any], source: str) -> None:
    shutil.rmtree(root, ignore_errors=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    tags = json.dumps([str(label) for label in entry.get("labels") or []])
    (root / "task.toml").write_text(TOML.format(level="medium", tags=tags, source=source))


def _oracle_answer(root: Path) -> str | None:
    """The example's output on the prepared environment (the answer a check-style oracle submits)."""
    try:
        snap = prepare(load_package(root))
    except (TaskBuildError, ConfigError):
        return None
    return run_blocking(_run_example(snap, (root / "tests" / "example.sh").read_text()), 120.0)


async def _run_example(snap: TaskSnapshot, script: str) -> str | None:
    sandbox = await snap.checkout()
    try:
        argv = ["bash", "-c", f"cd {shlex.quote(snap.workdir)} && bash -c {shlex.quote(script)}"]
        result = await sandbox.exec(argv, timeout_s=60.0, env=snap.env)
    finally:
        await snap.checkin(sandbox)
    return result.stdout.decode(errors="replace").strip() if result.ok else None


def convert(out_dir: Path, data: Path | None = None) -> ConversionReport:
    """Convert every entry of `data` (default: the installed data) into `out_dir/agentbench/<name>/`,
    keeping only those that validate."""
    data, report = data or data_dir(), ConversionReport()
    for file_name in FILES:
        path = data / file_name
        for entry in json.loads(path.read_text()) if path.is_file() else []:
            name = f"{file_name.removesuffix('.json').replace('_', '-')}-{entry['id']}"
            root = out_dir / "agentbench" / name
            try:
                files = _files(entry, data / "scripts")
            except Unsupported as exc:
                report.dropped[str(exc)] += 1
                continue
            _write(root, files, entry, f"{file_name}#{entry['id']}")
            reason = _finish(root)
            if reason is None:
                report.kept.append(name)
            else:
                report.dropped[reason] += 1
                shutil.rmtree(root, ignore_errors=True)
    return report


def _finish(root: Path) -> str | None:
    """None when the package is complete and validates, else the drop reason."""
    if (root / "tests" / "example.sh").is_file():
        answer = _oracle_answer(root)
        if answer is None:
            return "setup or example does not run here"
        (root / "solution" / "answer.txt").write_text(answer + "\n")
    check = check_package(root)
    if check.ok:
        return None
    first = check.failures[0]
    if "build step failed" in first or "task error" in first:
        return "setup does not run here (root, network or missing tools)"
    return "converted oracle does not validate"
