"""The BFCL multi-turn simulated APIs driven by plain data: create, call, encode state; also a script.

This module imports only the standard library (and, lazily, the `bfcl-eval` API modules), so the same file
serves in this process (gold replay, `isolation: process`) and as the runner script copied into a sandbox
(`isolation: sandbox`): there `python3 bfcl_runner.py` reads one JSON request on stdin, loads the
instances pickled in its folder, applies the request, saves them and prints one JSON reply.

Guarantees: a call's result text follows BFCL's executor (a str as is, a dict as JSON, anything else
`str()`, an exception `Error during execution: <message>`); `encode_state` turns every instance's public
attributes into a JSON value whose equality is the equality BFCL's state checker uses for these classes
(nested objects compared on their public attributes, a reference back to an enclosing object marked,
dict keys kept with their types). Not here: which functions the model may call (the environment decides)
or anything about isolation (the caller runs this file where it wants).
"""

from __future__ import annotations

import datetime
import importlib
import inspect
import json
import pickle
import sys
from pathlib import Path
from typing import Any

PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
CLASS_MODULES = {
    "GorillaFileSystem": "gorilla_file_system", "MathAPI": "math_api", "MessageAPI": "message_api",
    "TwitterAPI": "posting_api", "TicketAPI": "ticket_api", "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking", "VehicleControlAPI": "vehicle_control",
}  # fmt: skip
"""Each multi-turn API class and the module (file stem) that defines it."""
STATELESS = frozenset({"MathAPI"})
ERROR_PREFIX = "Error during execution: "
STATE_FILE = "bfcl_state.pkl"


def new_instances(classes: list[str], config: dict[str, Any], long_context: bool) -> dict[str, Any]:
    """Fresh instances of `classes`, each loaded with its part of the entry's `initial_config`."""
    instances = {}
    for name in classes:
        instance = getattr(importlib.import_module(f"{PACKAGE}.{CLASS_MODULES[name]}"), name)()
        if name not in STATELESS:
            instance._load_scenario(json.loads(json.dumps(config.get(name, {}))), long_context=long_context)
        instances[name] = instance
    return instances


def methods(instances: dict[str, Any]) -> dict[str, Any]:
    """Public method name -> bound method over all instances (a later class wins a shared name, as in BFCL)."""
    table = {}
    for instance in instances.values():
        for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not name.startswith("_"):
                table[name] = method
    return table


def result_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def apply(instances: dict[str, Any], name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """Call `name(**arguments)`: (True, result text) or (False, BFCL's error text)."""
    method = methods(instances).get(name)
    if method is None:
        return False, f"{ERROR_PREFIX}name '{name}' is not defined"
    try:
        return True, result_text(method(**arguments))
    except Exception as exc:  # the API's own failure is a result the model sees
        return False, f"{ERROR_PREFIX}{exc}"


def _encode(value: Any, enclosing: tuple[int, ...]) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if id(value) in enclosing:
        return {"__enclosing__": type(value).__name__}
    inner = (*enclosing, id(value))
    if isinstance(value, (list, tuple)):
        return [_encode(item, inner) for item in value]
    if isinstance(value, (set, frozenset)):
        return {"__set__": sorted((_encode(item, inner) for item in value), key=json.dumps)}
    if isinstance(value, dict):
        pairs = [[_encode(k, inner), _encode(v, inner)] for k, v in value.items()]
        return {"__dict__": sorted(pairs, key=lambda pair: json.dumps(pair[0]))}
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta)):
        return {"__time__": str(value)}
    if hasattr(value, "__dict__"):
        attrs = {k: _encode(v, inner) for k, v in vars(value).items() if not k.startswith("_")}
        return {"__object__": type(value).__name__, "attrs": attrs}
    return {"__repr__": repr(value)}


def encode_state(instances: dict[str, Any]) -> dict[str, Any]:
    """Every instance's public attributes as a JSON value (what BFCL's state checker compares)."""
    return {name: {k: _encode(v, (id(obj),)) for k, v in vars(obj).items() if not k.startswith("_")}
            for name, obj in instances.items()}  # fmt: skip


def _serve(request: dict[str, Any], state_path: Path) -> dict[str, Any]:
    if request["op"] == "init":
        instances = new_instances(request["classes"], request["config"], request["long_context"])
        reply: dict[str, Any] = {"ok": True}
    else:
        with state_path.open("rb") as f:
            instances = pickle.load(f)  # written by this script in this sandbox only
        if request["op"] == "call":
            ok, text = apply(instances, request["name"], request["arguments"])
            reply = {"ok": ok, "result": text}
        else:
            return {"ok": True, "state": encode_state(instances)}
    with state_path.open("wb") as f:
        pickle.dump(instances, f)
    return reply


def main() -> None:
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here / "lib"))
    reply = _serve(json.loads(sys.stdin.read()), here / STATE_FILE)
    sys.stdout.write(json.dumps(reply))


if __name__ == "__main__":
    main()
