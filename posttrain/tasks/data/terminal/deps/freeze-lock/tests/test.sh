#!/bin/bash
venv=$(pwd)/.venv
[ -x "$venv/bin/python" ] || { echo ".venv is not a virtual environment"; exit 1; }
"$venv/bin/python" - <<'PY'
import importlib.metadata, re, sys
expected = {"httpish": "2.3", "urlparts": "1.2", "certbits": "2024.1", "logfmt": "0.7", "colorterm": "1.9"}
installed = {d.metadata["Name"].lower(): d.version for d in importlib.metadata.distributions()}
for name, version in expected.items():
    if installed.get(name) != version:
        sys.exit(f"{name} {version} not installed in .venv (found {installed.get(name)})")
try:
    lines = [l.strip() for l in open("requirements.lock") if l.strip() and not l.startswith("#")]
except OSError:
    sys.exit("requirements.lock missing")
pins = {}
for line in lines:
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s;]+)", line)
    if not m:
        sys.exit(f"not a name==version line: {line!r}")
    pins[m[1].lower()] = m[2]
extra = {k: v for k, v in pins.items() if k not in ("pip", "setuptools", "wheel")}
if extra != expected:
    sys.exit(f"requirements.lock pins {extra}, expected {expected}")
PY
