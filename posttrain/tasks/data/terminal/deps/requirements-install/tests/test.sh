#!/bin/bash
venv=$(pwd)/.venv
[ -x "$venv/bin/python" ] || { echo ".venv is not a virtual environment"; exit 1; }
cd /tmp && "$venv/bin/python" - "$venv" <<'PY'
import importlib, importlib.metadata, sys
expected = {"slugify2": "0.9", "datebits": "3.1", "tinyjson": "0.4"}
for name, version in expected.items():
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        sys.exit(f"{name} not installed: {exc}")
    if not module.__file__.startswith(sys.argv[1] + "/lib/"):
        sys.exit(f"{name} is not installed in .venv")
    if importlib.metadata.version(name) != version or module.VERSION != version:
        sys.exit(f"expected {name} {version}, found {importlib.metadata.version(name)}")
PY
