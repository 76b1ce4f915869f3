"""Where one BFCL multi-turn episode's simulated APIs live: in this process, or in a sandbox of their own.

`open_apis(isolation, classes, config, long_context)` gives an `ApiSession` with `call(name, arguments)
-> (ok, result text)` and `state()` (the instances' public state as JSON, `bfcl_runner.encode_state`).
`process`: the instances are objects here (fast; for gold measurement). `sandbox`: a persistent
`posttrain.sandbox.Sandbox` per episode whose workspace holds the runner script, the API modules copied
from the installed `bfcl-eval` package (and `mpmath` when `MathAPI` is involved) and the pickled
instances; each call is one exec of `python3 bfcl_runner.py` (load, apply, save, print JSON).

Guarantees: both give the same results and states (a test compares them); a sandbox failure (timeout,
crash, memory) is an error result for that call, never an exception; the host never unpickles anything
the sandbox wrote (only JSON crosses back). Not here: the tool schemas or the grading (`bfcl_multi.py`).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Literal, Protocol

from posttrain.sandbox import Sandbox, SandboxSpec
from posttrain.sandbox.background import run_blocking
from posttrain.tasks.families import bfcl_runner
from posttrain.tasks.families.bfcl_runner import CLASS_MODULES, ERROR_PREFIX

Isolation = Literal["sandbox", "process"]
RUNNER = "bfcl_runner.py"


class ApiSession(Protocol):
    def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """Run one API method: (True, result text) or (False, error text)."""
        ...

    def state(self) -> dict[str, Any]:
        """Every instance's public state (JSON)."""
        ...

    def close(self) -> None: ...


class ProcessApis:
    """The instances as objects in this process."""

    def __init__(self, classes: list[str], config: dict[str, Any], long_context: bool) -> None:
        self.instances = bfcl_runner.new_instances(classes, config, long_context)

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        return bfcl_runner.apply(self.instances, name, arguments)

    def state(self) -> dict[str, Any]:
        return json.loads(json.dumps(bfcl_runner.encode_state(self.instances)))

    def close(self) -> None:
        pass


def _source_dir() -> Path:
    spec = importlib.util.find_spec(bfcl_runner.PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the bfcl_multi family needs the `bfcl-eval` package")
    return Path(next(iter(spec.submodule_search_locations)))


def _package_tree(name: str) -> dict[str, bytes]:
    """Every .py file of an installed package, keyed by its path relative to the package's parent."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {name!r} is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    return {f"{name}/{path.relative_to(root)}": path.read_bytes() for path in root.rglob("*.py")}


def sandbox_files(classes: list[str]) -> dict[str, str | bytes]:
    """The workspace of an API sandbox: the runner, empty package markers, the API modules (and mpmath)."""
    source, package_dir = _source_dir(), "lib/" + bfcl_runner.PACKAGE.replace(".", "/")
    files: dict[str, str | bytes] = {RUNNER: Path(bfcl_runner.__file__).read_bytes()}
    parts = bfcl_runner.PACKAGE.split(".")
    for depth in range(1, len(parts) + 1):
        files["lib/" + "/".join(parts[:depth]) + "/__init__.py"] = b""
    for stem in {"long_context", *(CLASS_MODULES[c] for c in classes)}:
        files[f"{package_dir}/{stem}.py"] = (source / f"{stem}.py").read_bytes()
    if "MathAPI" in classes:
        files.update({f"lib/{path}": data for path, data in _package_tree("mpmath").items()})
    return files


class SandboxApis:
    """The instances pickled in a sandbox of their own; one exec of the runner per request."""

    def __init__(self, classes: list[str], config: dict[str, Any], long_context: bool,
                 spec: SandboxSpec | None = None) -> None:  # fmt: skip
        base = spec or SandboxSpec(timeout_s=20.0, memory_mb=512, disk_mb=64)
        self.spec = base.model_copy(update={"files": sandbox_files(classes)})
        self.timeout_s = self.spec.timeout_s + 30.0
        self.sandbox: Sandbox | None = run_blocking(_create(self.spec), self.timeout_s)
        ok, reply = self._request({"op": "init", "classes": classes, "config": config, "long_context": long_context})
        if not ok:
            self.close()
            raise RuntimeError(f"BFCL API sandbox failed to start: {reply.get('result')}")

    def _request(self, request: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        if self.sandbox is None:
            return False, {"result": f"{ERROR_PREFIX}the API sandbox is closed"}
        payload = json.dumps(request).encode()
        result = run_blocking(self.sandbox.exec(["python3", RUNNER], payload), self.timeout_s)
        if not result.ok:
            detail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [result.status]
            return False, {"result": f"{ERROR_PREFIX}{result.status}: {detail[0][:300]}"}
        try:
            reply = json.loads(result.stdout)
        except ValueError:
            return False, {"result": f"{ERROR_PREFIX}the API runner printed no JSON reply"}
        return bool(reply.get("ok")), reply if isinstance(reply, dict) else {}

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        ok, reply = self._request({"op": "call", "name": name, "arguments": arguments})
        return ok, str(reply.get("result", ""))

    def state(self) -> dict[str, Any]:
        ok, reply = self._request({"op": "state"})
        if not ok or not isinstance(reply.get("state"), dict):
            raise RuntimeError(f"cannot read the API state: {reply.get('result')}")
        return dict(reply["state"])

    def close(self) -> None:
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            run_blocking(sandbox.close(), self.timeout_s)


async def _create(spec: SandboxSpec) -> Sandbox:
    return await Sandbox.create(spec)


def open_apis(isolation: Isolation, classes: list[str], config: dict[str, Any], long_context: bool) -> ApiSession:
    """The API instances of one episode, where `isolation` says."""
    if isolation == "sandbox":
        return SandboxApis(classes, config, long_context)
    return ProcessApis(classes, config, long_context)
