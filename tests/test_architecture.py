"""The package's shape: no import cycles between modules, imports only down the documented layers, and
torch-free modules that stay torch-free. The layer table here is the one in docs/architecture.md.

Every import counts: module level, inside functions, and under `TYPE_CHECKING`. `from pkg import name`
is an edge to the submodule `pkg.name` when there is one, else to `pkg` itself.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "posttrain"

BASE = {"errors", "types", "config", "plugins"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "types": set(),
    "config": {"errors"},
    "plugins": {"errors", "config"},
    "verify": BASE | {"sandbox"},
    "sandbox": BASE,
    "algo": BASE,
    "curriculum": BASE,
    "rollout": BASE,
    "sched": BASE,
    "dist": BASE | {"sched", "rollout", "verify", "sandbox"},
    "envs": BASE | {"verify", "sandbox", "rollout"},
    "tasks": BASE | {"verify", "sandbox", "envs"},
    "eval": BASE | {"verify", "rollout", "tasks", "envs"},
    "train": BASE | {"verify", "sandbox", "algo", "curriculum", "rollout", "tasks", "eval", "envs", "sched",
                     "dist"},
    "bench": BASE | {"verify", "sandbox", "algo", "curriculum", "rollout", "tasks", "eval", "train", "envs",
                     "sched", "dist"},
    "cli": BASE | {"verify", "sandbox", "algo", "curriculum", "rollout", "tasks", "eval", "train", "bench",
                   "envs", "sched", "dist"},
}
"""Package -> the packages it may import (top-level modules such as `types.py` count as packages)."""

TORCH_FREE = [
    "posttrain.config", "posttrain.types", "posttrain.verify", "posttrain.tasks.registry", "posttrain.tasks.pool",
    "posttrain.curriculum", "posttrain.rollout", "posttrain.rollout.config", "posttrain.algo",
    "posttrain.eval.evaluate", "posttrain.sandbox", "posttrain.train.config", "posttrain.plugins",
    "posttrain.errors", "posttrain.algo.config", "posttrain.curriculum.configs", "posttrain.verify.configs",
    "posttrain.tasks.sandbox_config", "posttrain.envs", "posttrain.verify.tool_calls",
    "posttrain.envs.schema", "posttrain.envs.tools", "posttrain.envs.base", "posttrain.envs.example",
    "posttrain.verify.bfcl_ast", "posttrain.tasks.families.bfcl", "posttrain.tasks.families.bfcl_multi",
    "posttrain.tasks.families.knowledge", "posttrain.verify.citations",
    "posttrain.sched", "posttrain.dist", "posttrain.dist.config",
    "posttrain.eval.hacking_run", "posttrain.eval.spotcheck",
    "posttrain.eval.gate", "posttrain.eval.matrix",
]
"""Modules whose import must not load torch (configs, CPU bookkeeping, the CLI's registration)."""


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Every posttrain module that `name` imports, anywhere in its source."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            subs = [f"{base}.{alias.name}" for alias in node.names]
            targets = [sub for sub in subs if sub in modules] or [base]
            if any(sub not in modules for sub in subs):
                targets.append(base)
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: set(imports_of(name, path, modules)) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<root>"


def test_the_graph_sees_function_level_and_type_only_imports() -> None:
    graph = import_graph()
    assert "posttrain.train.warm_start" in graph["posttrain.train.components"]  # imported inside a function
    assert len(graph) > 100


def test_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_between_modules() -> None:
    assert cycles(import_graph()) == []


def test_every_package_is_in_the_layer_table() -> None:
    assert {package_of(m) for m in module_names()} - {"<root>"} == set(ALLOWED)


def test_imports_follow_the_layers() -> None:
    offenders = [
        f"{module} imports {target}"
        for module, targets in sorted(import_graph().items())
        for target in sorted(targets)
        if package_of(target) != package_of(module)
        and package_of(module) != "<root>"
        and package_of(target) not in ALLOWED[package_of(module)]
    ]
    assert offenders == []


def test_the_layer_table_has_no_cycle() -> None:
    assert cycles({package: set(allowed) for package, allowed in ALLOWED.items()}) == []


def test_only_the_dist_package_imports_ray() -> None:
    users = [
        str(path.relative_to(ROOT))
        for path in PACKAGE.rglob("*.py")
        if "/dist/" not in str(path) and any(
            isinstance(node, ast.Import | ast.ImportFrom)
            and any((alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0] == "ray"
                    for alias in node.names)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )
    ]
    assert users == []


@pytest.mark.parametrize("module", TORCH_FREE)
def test_module_imports_no_torch(module: str) -> None:
    code = f"import sys, {module}; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False).returncode == 0, module


def test_building_the_command_line_imports_no_torch_and_no_bench() -> None:
    code = ("import sys, posttrain.cli; posttrain.cli.build_parser(); "
            "sys.exit(1 if {'torch', 'posttrain.bench'} & set(sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False).returncode == 0


def test_architecture_doc_names_only_what_exists_and_every_package() -> None:
    import importlib
    import re

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"posttrain/[\w/]*[\w]+(?:\.py)?/?", text))
    missing = sorted(p for p in paths if not (ROOT / p).exists() and "dist" not in p and "sched" not in p)
    assert missing == []
    dotted = set(re.findall(r"`(posttrain(?:\.\w+)+)`", text))
    unresolved = []
    for name in sorted(dotted):
        module, _, attr = name, "", ""
        while module not in module_names() and "." in module:
            module, _, attr = module.rpartition(".")[0], "", name[len(module.rpartition(".")[0]) + 1:]
        if module not in module_names() or (attr and not hasattr(importlib.import_module(module), attr)):
            unresolved.append(name)
    assert unresolved == []
    packages = {p.parent.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("__init__.py")}
    assert sorted(p for p in packages if f"{p}/" not in text and f"`{p}`" not in text) == []
