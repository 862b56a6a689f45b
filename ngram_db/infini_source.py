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

The engine trusts its files, and a damaged one kills the process that maps it. So opening
checks the manifest and every shard's files first (ngram_db/infini_check.py: regular files,
sizes that agree with each other and the manifest), and the engine runs in a worker process
(ngram_db/infini_worker.py), one per source, kept for its lookups. A check that fails raises
InfiniIndexError; a worker that dies (a crash, a file truncated under its map) or does not
answer in ``LOOKUP_TIMEOUT_S`` makes that lookup and every later one raise InfiniIndexError,
which the server reports once and then serves without the index
(lsp_server/stores/shared_indexes.py).
A lookup through the worker costs a pipe's round trip more than in-process:
bench/results/infini_worker.json.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ngram_db.infini import END_TOKEN, SHARDS, read_manifest
from ngram_db.infini_check import InfiniIndexError, ShardFiles, check_shard
from superposed.ngram import Match

MAX_CONTEXT = 256  # context tokens looked up at most (SuffixIndex.max_context)
OPEN_TIMEOUT_S = 60.0  # the engine only maps its files: seconds mean a hung file system
LOOKUP_TIMEOUT_S = 10.0  # one lookup; tens of milliseconds on a 21-shard index (docs/scale.md)
WORKER = Path(__file__).with_name("infini_worker.py")
ERROR_TAIL = 300  # characters of the worker's stderr quoted in a report


def _shards(folder: Path, fingerprint: str) -> tuple[list[ShardFiles], int]:
    """The checked shards of the index at ``folder`` and its tokens; raises InfiniIndexError."""
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
    entries = manifest.get("shards", {})
    if not isinstance(entries, dict):
        raise InfiniIndexError(f"{folder}/manifest.json has no shard table: rebuild the index")
    odd = [name for name in entries if not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*", name)]
    if odd:  # not a name shard_name gives: a path out of the index, say
        raise InfiniIndexError(f"{folder}/manifest.json names shards {odd!r}: rebuild the index")
    shards = [check_shard(folder / SHARDS / name, entry) for name, entry in sorted(entries.items())]
    return shards, sum(s.tokens - s.documents for s in shards)


def _stop(process: subprocess.Popen[bytes], ends: Sequence[Connection], scratch: str) -> None:
    """End a worker (its finalizer: also at the server's exit) and remove its scratch folder."""
    for end in ends:
        end.close()
    if process.poll() is None:
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # stuck in a hung mount: let be
            process.wait(timeout=5)
    shutil.rmtree(scratch, ignore_errors=True)


class _Worker:
    """One engine in a child process (ngram_db/infini_worker.py) over checked shards."""

    def __init__(self, shards: Sequence[ShardFiles], name: str) -> None:
        self.name = name
        self.scratch = tempfile.mkdtemp(prefix="superposed-infini-")
        self._log = Path(self.scratch) / "worker.log"
        try:
            self.process, self._requests, self._answers = self._start(shards)
        except OSError as err:  # no scratch folder, no process: as unusable as a bad shard
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise InfiniIndexError(f"shared index {name}: its engine cannot start: {err}") from err
        self.dead: str | None = None  # why it stopped answering
        self._finalizer = weakref.finalize(
            self, _stop, self.process, (self._requests, self._answers), self.scratch
        )
        self._answer(OPEN_TIMEOUT_S, "while opening")

    def _start(
        self, shards: Sequence[ShardFiles]
    ) -> tuple[subprocess.Popen[bytes], Connection, Connection]:
        """The engine's view of the shards (links with clean names: the worker's doc) and
        the process, with a pipe each way."""
        for i, shard in enumerate(shards):
            folder = Path(self.scratch) / f"s{i}"
            folder.mkdir()
            for file, target in shard.files.items():
                os.symlink(target, folder / file)
        request_read, request_write = os.pipe()
        answer_read, answer_write = os.pipe()
        try:
            with open(self._log, "wb") as log:
                process = subprocess.Popen(
                    [sys.executable, "-I", str(WORKER), str(request_read), str(answer_write),
                     self.scratch, str(END_TOKEN), str(len(shards))],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    pass_fds=(request_read, answer_write),
                )  # fmt: skip
        except OSError:
            os.close(request_write)
            os.close(answer_read)
            raise
        finally:
            os.close(request_read)
            os.close(answer_write)
        requests = Connection(request_write, readable=False)
        return process, requests, Connection(answer_read, writable=False)

    def _failed(self, why: str, crashed: bool = True) -> InfiniIndexError:
        """Stop the worker for good; the error that says why (how it ended, when it
        ``crashed`` rather than hung, and its last output)."""
        code = None
        if crashed:  # it is ending: its status says how
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.process.wait(timeout=5)
        if code is not None and code < 0:
            why = f"{why}: the engine was killed by {signal.Signals(-code).name}"
        elif code is not None:
            why = f"{why}: the engine exited with status {code}"
        try:
            tail = self._log.read_text(errors="replace").strip()[-ERROR_TAIL:]
        except OSError:
            tail = ""
        self._finalizer()  # kills it if still running, removes the scratch folder
        self.dead = (
            f"shared index {self.name} stopped {why}{f' ({tail})' if tail else ''}; a shard "
            "is damaged or changed while in use: rebuild or re-sync the index (it is left "
            "out until the setting or the model changes)"
        )
        return InfiniIndexError(self.dead)

    def _answer(self, timeout: float, doing: str) -> Any:
        try:
            if not self._answers.poll(timeout):
                raise self._failed(f"{doing}: it did not answer in {timeout:g} s", False)
            kind, value = self._answers.recv()
        except (EOFError, OSError) as err:
            raise self._failed(doing) from err
        if kind == "error":
            raise InfiniIndexError(f"shared index {self.name}: {value}")
        return value

    def lookup(self, query: list[int], follow: int, others: int) -> Any:
        """The worker's answer to one lookup; raises InfiniIndexError once it is dead."""
        if self.dead is not None:
            raise InfiniIndexError(self.dead)
        try:
            self._requests.send((query, follow, others))
        except OSError as err:
            raise self._failed("before a lookup") from err
        return self._answer(LOOKUP_TIMEOUT_S, "during a lookup")

    def close(self) -> None:
        self._finalizer()


class InfiniSource:
    """Shared indexes (folders built by ``index-repo --engine infini-gram``) as one source."""

    def __init__(self, folders: Sequence[str | Path], fingerprint: str) -> None:
        """Check the indexes and start their engine; raises InfiniIndexError when one
        cannot be used."""
        shards: list[ShardFiles] = []
        self.tokens = 0
        for folder in folders:
            found, tokens = _shards(Path(folder).expanduser(), fingerprint)
            shards.extend(found)
            self.tokens += tokens
        self.folders = [str(f) for f in folders]
        self._lock = threading.Lock()  # one query at a time per engine: keep it simple
        self._closed = False
        name = ", ".join(self.folders)
        self._worker = _Worker(shards, name) if shards else None

    def __len__(self) -> int:
        return self.tokens

    def close(self) -> None:
        """Stop the engine's process; later lookups find nothing."""
        with self._lock:
            self._closed = True
            if self._worker is not None:
                self._worker.close()

    def match(self, context: Sequence[int], follow: int = 32, others: int = 0) -> Match | None:
        """The longest match of ``context`` in the shared indexes (see the module doc);
        raises InfiniIndexError when the engine's process died or hangs."""
        if self._worker is None or not context:
            return None
        query = [int(t) for t in context[-MAX_CONTEXT:]]
        if any(t < 0 or t >= END_TOKEN for t in query):
            return None
        with self._lock:
            if self._closed:
                return None
            found = self._worker.lookup(query, int(follow), int(others))
        if found is None:
            return None
        length, counts, continuation, alternatives = found
        return Match(length, dict(counts), continuation, alternatives)
