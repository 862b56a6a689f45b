"""oneDNN's caches of compiled matmuls, bounded before torch first uses them (issue 51 item 7).

A long prefill's bf16 matmuls run on oneDNN through PyTorch's ideep, which builds a primitive
(JIT-compiled kernels and their buffers) for each shape: four for each prompt length (qkv,
out, gate_up, down; the 30 layers share them). Two caches keep them, each on its own and
each for 1,024 entries by default: oneDNN's (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``) and ideep's
(``LRU_CACHE_CAPACITY``, PyTorch issue 29893). A server's prompt lengths rarely repeat, so
the primitives of every length it had seen stayed resident after its documents closed
(``bench/results/onednn_caches.md``: held memory after prefills of distinct lengths, by
capacity); bounding only one cache leaves the other holding them.

Both libraries read their variable once, when their cache is first used, so this runs before
any torch work: at the start of ``lsp_server.cli.main``. A value the user set is kept.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

# Entries in each cache: a forward reuses its four shapes across the layers, and 16 keep four
# lengths' (onednn_caches.md: 16, and even 1, prefilled as fast as 1,024 and held less).
CAPACITY = 16
VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


def bound_onednn_caches(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set both caches' capacity to CAPACITY in ``environ``, where the user has not set it."""
    for name in VARIABLES:
        environ.setdefault(name, str(CAPACITY))
