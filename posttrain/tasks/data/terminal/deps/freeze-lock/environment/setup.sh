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
w() { printf 'VERSION = "%s"\n' "$2" | wheel "$1" "$2" "$3"; }
w httpish 2.3 'urlparts>=1.1;certbits'
w httpish 2.4 'urlparts>=1.2;certbits'
w urlparts 1.1 ''
w urlparts 1.2 ''
w certbits 2024.1 ''
w logfmt 0.7 'colorterm<2'
w colorterm 1.9 ''
w colorterm 2.0 ''
w unused 1.0 ''
printf 'httpish==2.3\nlogfmt\n' > requirements.in
rm -f /tmp/mkwheel.py
