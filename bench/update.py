"""Policy-update benchmark entry point: `python bench/update.py [--json] [--out DIR] [--prompt-tokens N] [--rounds N]`."""

from __future__ import annotations

import sys

from posttrain.bench.update import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
