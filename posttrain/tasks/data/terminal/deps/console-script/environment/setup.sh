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
wheel textpad 0.5 '' <<'PY'
def pad(text, width):
    return text + "." * (width - len(text))
PY
wheel tablefmt 1.0 '' <<'PY'
def table(rows):
    return "\n".join(" ".join(r) for r in rows)
PY
wheel tablefmt 2.1 'textpad>=0.5' <<'PY'
from textpad import pad


def table(rows, width=8):
    return "\n".join("|".join(pad(cell, width) for cell in row) for row in rows)
PY
printf '[console_scripts]\nmkreport = reportcli:main\n' > /tmp/ep.txt
wheel reportcli 1.0 'tablefmt>=2.0' /tmp/ep.txt <<'PY'
import sys

from tablefmt import table


def main():
    items = sys.argv[1:] or ["empty"]
    print(table([["item", "length"]] + [[item, str(len(item))] for item in items]))
PY
rm -f /tmp/mkwheel.py /tmp/ep.txt
