#!/bin/bash
venv=$(pwd)/.venv
[ -x "$venv/bin/python" ] || { echo ".venv is not a virtual environment"; exit 1; }
cd /tmp && "$venv/bin/python" - "$venv" <<'PY'
import importlib.metadata, sys
try:
    import colorfmt
except ImportError as exc:
    sys.exit(f"colorfmt not installed: {exc}")
if not colorfmt.__file__.startswith(sys.argv[1] + "/lib/"):
    sys.exit("colorfmt is not installed in .venv")
version = importlib.metadata.version("colorfmt")
if version != "1.1" or colorfmt.VERSION != "1.1":
    sys.exit(f"expected colorfmt 1.1, found {version}")
PY
