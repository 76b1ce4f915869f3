"""Agent episode benchmark entry point: `python bench/agents.py [--json] [--out DIR]`."""

from __future__ import annotations

import sys

from posttrain.bench.agents import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
