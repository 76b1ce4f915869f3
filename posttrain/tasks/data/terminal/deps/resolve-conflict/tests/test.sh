#!/bin/bash
fail() { echo "$1"; exit 1; }
[ "$(sed 's/[[:space:]]//g; /^$/d' requirements.txt)" = $'#servicedependencies\nalpha==1.0\nbeta==1.5\ndelta==3.0' ] \
  || fail "requirements.txt should pin beta==1.5 and be otherwise unchanged"
venv=$(pwd)/.venv
[ -x "$venv/bin/python" ] || fail ".venv is not a virtual environment"
"$venv/bin/python" - <<'PY' || exit 1
import importlib.metadata, sys
expected = {"alpha": "1.0", "beta": "1.5", "gamma": "1.0", "delta": "3.0"}
for name, version in expected.items():
    try:
        found = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        sys.exit(f"{name} not installed in .venv")
    if found != version:
        sys.exit(f"expected {name} {version}, found {found}")
PY
"$venv/bin/python" -m pip check > /dev/null 2>&1 || fail "pip check reports broken requirements"
