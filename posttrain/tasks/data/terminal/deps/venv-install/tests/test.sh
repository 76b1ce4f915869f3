#!/bin/bash
venv=$(pwd)/.venv
[ -x "$venv/bin/python" ] || { echo ".venv is not a virtual environment"; exit 1; }
cd /tmp && "$venv/bin/python" - "$venv" <<'PY'
import importlib.metadata, sys
try:
    import greetlib
except ImportError as exc:
    sys.exit(f"greetlib not installed: {exc}")
if not greetlib.__file__.startswith(sys.argv[1] + "/lib/"):
    sys.exit(f"greetlib is not installed in .venv: {greetlib.__file__}")
if importlib.metadata.version("greetlib") != "1.0" or greetlib.greet("Ann") != "Hello, Ann, from greetlib 1.0":
    sys.exit("wrong greetlib")
PY
