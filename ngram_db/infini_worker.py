"""The child process that runs infini-gram's C++ engine for ngram_db/infini_source.py.

A damaged or changing shard crashes the engine (SIGSEGV, SIGBUS, SIGABRT) however well it
was checked at opening (ngram_db/infini_check.py samples, and a file can be truncated while
mapped), so the engine lives here, in a process of its own that the server talks to over two
pipes: a crash costs the lookup in flight, not the server.

The engine finds a shard's files by searching the *whole path* of each directory entry for
``tokenized``, ``table``, ``offset``, ``metadata``, ``metaoff`` and ``unigram``: an index under
``/srv/stable/org`` had every file taken for a suffix array and crashed at the first lookup.
So the engine never sees the index's paths: the parent makes a scratch folder of one
sub-folder a shard, ``s0``, ``s1``..., each holding links named ``tokenized.0``, ``offset.0``
and ``table.0`` to the checked files; this process changes into it and opens the relative
``s0``, ``s1``...: no path the engine reads holds anything but those names.

Run as a script, not as ``-m ngram_db...``: it imports neither ngram_db (0.7 s of imports)
nor numpy, only the standard library and infini_gram. Its stdout is never the protocol: the
engine may print.

Protocol (multiprocessing.connection framing, pickled tuples): after opening, the worker
sends ``("ready", shards)``; each request ``(query, follow, others)`` gets
``("match", (length, counts, continuation, others) | None)`` or ``("error", text)``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

MAX_SUPPORT = 64  # occurrences whose next tokens are counted (the SuffixIndex's too)
Found = tuple[int, dict[int, int], list[int], list[list[int]]]


def open_engine(dirs: Sequence[str], end_token: int) -> Any:
    """infini-gram's engine over the shard folders ``dirs`` (paths free of its file words)."""
    from infini_gram.engine import InfiniGramEngine

    return InfiniGramEngine(
        index_dir=list(dirs), eos_token_id=end_token, vocab_size=end_token + 1,
        token_dtype="u16", max_support=MAX_SUPPORT,
    )  # fmt: skip


def _distribution(engine: Any, query: list[int], end_token: int) -> tuple[int, dict[int, int]]:
    """(length, next-token counts) of the longest suffix of ``query`` that something
    other than a file's end follows; (0, {}) when none."""
    while query:
        found = engine.infgram_ntd(prompt_ids=query)
        if "error" in found:
            return 0, {}
        length = int(found["suffix_len"])
        if length == 0:
            return 0, {}
        counts = {
            int(t): int(r["cont_cnt"])
            for t, r in found["result_by_token_id"].items()
            if int(t) != end_token
        }
        if counts:
            return length, counts
        query = query[len(query) - length + 1 :]  # only a file's end follows: shorter
    return 0, {}


def _continuations(
    engine: Any, needle: list[int], matched: int, follow: int, limit: int
) -> list[list[int]]:
    """Up to ``limit`` texts that follow occurrences of ``needle`` (from its token at
    ``matched`` on), ``follow`` tokens each, in the engine's order."""
    found = engine.find(input_ids=needle)
    if "error" in found:
        return []
    wanted: list[tuple[int, int, int, int]] = []
    for shard, (lo, hi) in enumerate(found["segment_by_shard"]):
        for rank in range(lo, min(hi, lo + limit - len(wanted))):
            wanted.append((shard, rank, len(needle), follow))
        if len(wanted) >= limit:
            break
    if not wanted:
        return []
    docs = engine.get_docs_by_ranks_2(requests=wanted)
    if isinstance(docs, dict):  # an error
        return []
    out = []
    for doc in docs:
        start = int(doc["needle_offset"]) + matched
        out.append([int(t) for t in doc["token_ids"][start : start + follow]])
    return out


def lookup(engine: Any, query: list[int], follow: int, others: int, end_token: int) -> Found | None:
    """The longest match of ``query`` (ids below ``end_token``) as the fields of a Match."""
    length, counts = _distribution(engine, query, end_token)
    if not length:
        return None
    suffix = query[len(query) - length :]
    best = max(counts, key=lambda t: counts[t])
    firsts = _continuations(engine, [*suffix, best], length, follow, 1)
    continuation = firsts[0] if firsts else [best]
    alternatives: list[list[int]] = []
    if others:
        for text in _continuations(engine, suffix, length, follow, 4 * others):
            if len(alternatives) == others:
                break
            if text and text != continuation and text not in alternatives:
                alternatives.append(text)
    return length, counts, continuation, alternatives


def serve(requests: Connection, answers: Connection, engine: Any, end_token: int) -> None:
    """Answer lookups until the parent closes its end."""
    while True:
        try:
            query, follow, others = requests.recv()
        except EOFError:
            return
        try:
            answers.send(("match", lookup(engine, query, follow, others, end_token)))
        except Exception as err:  # a bug or an engine error: the parent reports it
            answers.send(("error", f"{type(err).__name__}: {err}"))


def main(argv: Sequence[str]) -> int:
    """``infini_worker.py REQUEST_FD ANSWER_FD SCRATCH END_TOKEN SHARDS``."""
    request_fd, answer_fd, scratch, end_token, shards = argv
    requests = Connection(int(request_fd), writable=False)
    answers = Connection(int(answer_fd), readable=False)
    os.chdir(scratch)
    engine = open_engine([f"s{i}" for i in range(int(shards))], int(end_token))
    answers.send(("ready", int(shards)))
    serve(requests, answers, engine, int(end_token))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
