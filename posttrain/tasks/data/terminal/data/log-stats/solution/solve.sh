#!/bin/bash
python3 - <<'PY'
import collections, json
lines = [l.split() for l in open("access.log") if l.strip()]
paths = collections.Counter(f[6].split("?")[0] for f in lines)
stats = {
    "requests": len(lines),
    "unique_ips": len({f[0] for f in lines}),
    "status": dict(collections.Counter(f[8] for f in lines)),
    "bytes_5xx": sum(int(f[9]) for f in lines if f[8].startswith("5")),
    "top_paths": [[p, c] for p, c in sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[:3]],
}
json.dump(stats, open("stats.json", "w"), indent=2)
PY
