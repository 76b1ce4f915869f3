"""`python -m posttrain.cli`: the same command line as the `posttrain` script."""

from __future__ import annotations

import sys

from posttrain.cli import main

sys.exit(main())
