#!/bin/bash
python3 - <<'PY'
src = open("textstats.py").read()
src = src.replace('re.findall(r"[a-z0-9\']+", text)', 're.findall(r"[a-z0-9\']+", text.lower())')
src = src.replace("/ len(text)", "/ len(found)")
src = src.replace("key=lambda w: (len(w), w), reverse=True)", "key=lambda w: (-len(w), w))")
src = src.replace("distinct[: n - 1]", "distinct[:n]")
open("textstats.py", "w").write(src)
PY
