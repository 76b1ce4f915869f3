"""Sandbox benchmark entry point: `python bench/sandbox.py [--json] [--out DIR] [--quick]`."""

from __future__ import annotations

import sys

from posttrain.bench.sandbox import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
