"""Knowledge-serving benchmark entry point: `python bench/knowledge.py [--full] [--model tiny|smollm2] [--json]`."""

from __future__ import annotations

import sys

from posttrain.bench.knowledge import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
