"""A shared infini-gram index (ngram_db/infini.py) as one more MatchSource of the memory.

infini-gram's engine memory-maps every shard's token ids and suffix array, so the server's
RAM does not grow with the index (its pages are the kernel's cache), and answers in C++:

- ``infgram_ntd(context)``: the longest suffix of the context that occurs (its length) and
  the tokens that followed it, counted (sampled past ``max_support`` occurrences): the
  ``Match``'s length and next_counts;
- ``find(suffix + [token])`` and ``get_docs_by_ranks_2``: occurrences of the matched
  suffix followed by the commonest next token, and the document text around them: the
  continuation (and ``others``).

Like ``SuffixIndex.match`` with ``min_follow``, a suffix that is only ever followed by a
file's end continues nothing: the next shorter suffix is the match. Which occurrence gives the
continuation differs: infini-gram orders occurrences by suffix, not by recency, so it is the
first in that order, not the latest written.

Opening checks the manifest first (the engine's C++ asserts would abort the process on a
missing file): a missing index, one built with another tokenizer, or a shard with a missing
file raises InfiniIndexError, which the server reports once and then serves without it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ngram_db.infini import END_TOKEN, SHARDS, InfiniIndexError, read_manifest
from superposed.ngram import Match

MAX_SUPPORT = 64  # occurrences whose next tokens are counted (the SuffixIndex's too)
MAX_CONTEXT = 256  # context tokens looked up at most (SuffixIndex.max_context)
_SHARD_FILES = ("tokenized.0", "offset.0", "table.0")


def _shard_dirs(folder: Path, fingerprint: str) -> tuple[list[str], int]:
    """The shard folders of the index at ``folder`` and its tokens; raises InfiniIndexError."""
    if not folder.is_dir():
        raise InfiniIndexError(f"shared index {folder} does not exist")
    manifest = read_manifest(folder)
    if manifest is None:
        raise InfiniIndexError(f"{folder} has no manifest.json: not an index-repo index")
    if manifest.get("tokenizer") != fingerprint:
        raise InfiniIndexError(
            f"shared index {folder} was built with another tokenizer "
            f"({manifest.get('model')!r}, {manifest.get('tokenizer')}; this model's is "
            f"{fingerprint}): rebuild it with this model's --model"
        )
    dirs: list[str] = []
    tokens = 0
    for name, shard in sorted(manifest.get("shards", {}).items()):
        shard_dir = folder / SHARDS / name
        missing = [f for f in _SHARD_FILES if not (shard_dir / f).is_file()]
        if missing:
            raise InfiniIndexError(f"shard {shard_dir} lacks {', '.join(missing)}")
        dirs.append(str(shard_dir))
        tokens += int(shard.get("tokens", 0))
    return dirs, tokens


class InfiniSource:
    """Shared indexes (folders built by ``index-repo --engine infini-gram``) as one source."""

    def __init__(self, folders: Sequence[str | Path], fingerprint: str) -> None:
        """Open the indexes read-only; raises InfiniIndexError when one cannot be used."""
        dirs: list[str] = []
        self.tokens = 0
        for folder in folders:
            found, tokens = _shard_dirs(Path(folder).expanduser(), fingerprint)
            dirs.extend(found)
            self.tokens += tokens
        self.folders = [str(f) for f in folders]
        self.engine: Any = None
        if dirs:
            from infini_gram.engine import InfiniGramEngine

            self.engine = InfiniGramEngine(
                index_dir=dirs, eos_token_id=END_TOKEN, vocab_size=END_TOKEN + 1,
                token_dtype="u16", max_support=MAX_SUPPORT,
            )  # fmt: skip
        self._lock = threading.Lock()  # one query at a time per engine: keep it simple

    def __len__(self) -> int:
        return self.tokens

    def _distribution(self, query: list[int]) -> tuple[int, dict[int, int]]:
        """(length, next-token counts) of the longest suffix of ``query`` that something
        other than a file's end follows; (0, {}) when none."""
        while query:
            found = self.engine.infgram_ntd(prompt_ids=query)
            if "error" in found:
                return 0, {}
            length = int(found["suffix_len"])
            if length == 0:
                return 0, {}
            counts = {
                int(t): int(r["cont_cnt"])
                for t, r in found["result_by_token_id"].items()
                if int(t) != END_TOKEN
            }
            if counts:
                return length, counts
            query = query[len(query) - length + 1 :]  # only a file's end follows: shorter
        return 0, {}

    def _continuations(
        self, needle: list[int], matched: int, follow: int, limit: int
    ) -> list[list[int]]:
        """Up to ``limit`` texts that follow occurrences of ``needle`` (from its token at
        ``matched`` on), ``follow`` tokens each, in the engine's order."""
        found = self.engine.find(input_ids=needle)
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
        docs = self.engine.get_docs_by_ranks_2(requests=wanted)
        if isinstance(docs, dict):  # an error
            return []
        out = []
        for doc in docs:
            start = int(doc["needle_offset"]) + matched
            out.append([int(t) for t in doc["token_ids"][start : start + follow]])
        return out

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        """The longest match of ``context`` in the shared indexes (see the module doc)."""
        if self.engine is None or not context:
            return None
        query = [int(t) for t in context[-MAX_CONTEXT:]]
        if any(t < 0 or t >= END_TOKEN for t in query):
            return None
        with self._lock:
            length, counts = self._distribution(query)
            if not length:
                return None
            suffix = query[len(query) - length :]
            best = max(counts, key=lambda t: counts[t])
            firsts = self._continuations([*suffix, best], length, follow, 1)
            continuation = firsts[0] if firsts else [best]
            alternatives: list[list[int]] = []
            if others:
                for text in self._continuations(suffix, length, follow, 4 * others):
                    if len(alternatives) == others:
                        break
                    if text and text != continuation and text not in alternatives:
                        alternatives.append(text)
        return Match(length, dict(Counter(counts)), continuation, alternatives)
