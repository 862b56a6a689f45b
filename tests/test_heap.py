"""The C heap after a model load keeps a request's freed temporaries for the next (glibc)."""

from __future__ import annotations

import resource
import subprocess
import sys

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


ARENAS = """
import ctypes, os, sys, threading
from superposed.model import compact_loading
libc = ctypes.CDLL("libc.so.6")

def arenas():
    # malloc_stats writes one "Arena N:" line per arena to stderr
    read, write = os.pipe()
    saved = os.dup(2)
    os.dup2(write, 2)
    libc.malloc_stats()
    os.dup2(saved, 2)
    os.close(write)
    return os.read(read, 1 << 16).decode().count("Arena ")

def allocate(hold=None):
    block = bytearray(4 << 20)
    del block
    if hold is not None:
        hold.wait()

held = threading.Event()  # a thread from before the load that lives on (the engine thread)
engine = threading.Thread(target=allocate, args=(held,))
engine.start()
with compact_loading():
    pass
before = arenas()
worker = threading.Thread(target=allocate)
worker.start(); worker.join()
print(before, arenas())
held.set()
"""


def test_a_thread_started_after_a_load_keeps_no_heap_of_its_own() -> None:
    """The thread that de-quantizes the next layer (prefill.DequantizedBlocks) came after the
    load: with an arena of its own it kept up to the trim threshold of freed heap beside the
    engine thread's, and the server's peak rose 632 -> 654 MiB against a target of 650
    (bench/results/memory_back-ahead.md); sharing the arenas made, 643."""
    done = subprocess.run(
        [sys.executable, "-c", ARENAS], capture_output=True, text=True, check=True, timeout=60
    )
    before, after = map(int, done.stdout.split())
    assert before >= 2 and after == before
