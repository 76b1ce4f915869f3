#!/bin/bash
cat > report.py <<'PY'
import sys


def load(path):
    rows = []
    with open(path) as f:
        for line in f
            name, score = line.split()
            rows.append((name, int(score)))
    return rows


def main():
    rows = load(sys.argv[1])
    best = max(rows, key=lambda r: r[1])
    print(f"players: {len(rows)}")
    print(f"total: {sum(s for _, s in rows)}")
    print(f"best: {best[0]} ({best[1]})")


main()
PY
printf 'ann 10\nbo 32\ncy 7\n' > data.txt
