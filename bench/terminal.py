"""Terminal rollout benchmark entry point: `python bench/terminal.py [--json] [--out DIR] [--rounds N]`."""

from __future__ import annotations

import sys

from posttrain.bench.terminal import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
