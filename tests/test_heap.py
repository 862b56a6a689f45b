"""The C heap after a model load keeps a request's freed temporaries for the next (glibc)."""

from __future__ import annotations

import resource

import pytest

from superposed import model
from superposed.model import compact_loading

pytestmark = pytest.mark.skipif(model._glibc() is None, reason="glibc's heap only")

BLOCK = 4 * 2**20  # a de-quantized layer's weight of the default model is 3.5 MB


def faults_reusing(size: int, times: int) -> int:
    """Minor page faults while a block of ``size`` bytes is allocated, written and freed
    ``times`` times in turn (a prefill's layers, one after another)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(times):
        block = bytearray(size)  # calloc: every page written
        del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_a_freed_temporary_is_reused_without_faulting_its_pages_in_again() -> None:
    """After a load, glibc's mmap threshold is fixed, which also stopped it raising the trim
    threshold: each freed layer went back to the system and was faulted in anew by the next,
    about 18,000 page faults a prefill (bench/results/prefill_parts.md)."""
    with compact_loading():
        pass
    faults_reusing(BLOCK, 2)  # the heap grows to hold one block
    pages = BLOCK // resource.getpagesize()
    assert faults_reusing(BLOCK, 20) < pages  # without the kept heap: every time, every page
