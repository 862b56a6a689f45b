"""``python -m bench.lsp_latency``: the driver in bench/lsp_latency/__init__.py."""

import sys

from bench.lsp_latency import main

sys.exit(main())
