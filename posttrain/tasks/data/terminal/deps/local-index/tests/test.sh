#!/bin/bash
venv=$(pwd)/.venv
[ -x "$venv/bin/python" ] || { echo ".venv is not a virtual environment"; exit 1; }
cd /tmp && "$venv/bin/python" - "$venv" <<'PY'
import importlib.metadata, sys
expected = {"metrics": "2.0", "mathcore": "2.2"}
for name, version in expected.items():
    try:
        found = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        sys.exit(f"{name} not installed in .venv")
    if found != version:
        sys.exit(f"expected {name} {version}, found {found}")
import metrics
if not metrics.__file__.startswith(sys.argv[1] + "/lib/") or metrics.mean([1, 2, 6]) != 3:
    sys.exit("metrics does not work from .venv")
PY
