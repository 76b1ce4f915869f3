#!/bin/bash
set -e
mkdir -p wheels
cat > /tmp/mkwheel.py <<'PY'
"""Write a minimal pure-Python wheel: mkwheel.py NAME VERSION 'REQ;REQ' [entry_points_file]; module source on stdin."""
import sys
import zipfile

name, version, requires = sys.argv[1], sys.argv[2], [r for r in sys.argv[3].split(";") if r]
files = {f"{name}/__init__.py": sys.stdin.read()}
info = f"{name}-{version}.dist-info"
files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                             + "".join(f"Requires-Dist: {r}\n" for r in requires))
files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: mkwheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
if len(sys.argv) > 4:
    files[f"{info}/entry_points.txt"] = open(sys.argv[4]).read()
files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
with zipfile.ZipFile(f"wheels/{name}-{version}-py3-none-any.whl", "w") as whl:
    for path, text in files.items():
        entry = zipfile.ZipInfo(path, date_time=(2024, 1, 1, 0, 0, 0))
        entry.external_attr = 0o644 << 16
        whl.writestr(entry, text)
PY
wheel() { python3 /tmp/mkwheel.py "$@"; }
wheel greetlib 1.0 '' <<'PY'
VERSION = "1.0"


def greet(name):
    return f"Hello, {name}, from greetlib {VERSION}"
PY
rm -f /tmp/mkwheel.py
