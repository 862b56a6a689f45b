"""A store's suffix index on disk (ngram_db/suffix_store.py) and the memory that maps it.

The base file matches as the index built in RAM does; the memory sees a store changed by
another connection (as another process, index-repo --forget, would change it) at its next
use; forgetting leaves no forgotten token sequence in the suffix files and unmaps them; a store
without a base answers at once and gets one in the background; a damaged one is rebuilt.
"""

from __future__ import annotations

import gc
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lsp_server.stores import store_indexes
from lsp_server.stores.match_indexes import MatchIndexes
from ngram_db import suffix_store
from ngram_db.indexer import index_repo
from ngram_db.records import FileTokens, content_hash
from ngram_db.store import NgramStore
from ngram_db.suffix import SuffixIndex, brute_force_longest
from ngram_db.suffix_store import base_path, open_base, write_base
from ngram_db.tokenizer import ByteTokenizer

BYTES = ByteTokenizer()
SECRET = "def rotate(key):\n    return vault.unseal(key, passphrase='blue-heron-417')\n"
KEPT = "def render(page):\n    return template.expand(page, columns=3, margin=12)\n"


def ids(text: str) -> np.ndarray:
    return BYTES.encode_batch([text])[0]


def knows(source: Any, text: str) -> bool:
    """Whether ``source`` (an index, a MatchSet, None) matches most of ``text``."""
    context = ids(text)[:-8].tolist()  # an occurrence counts with 4+ tokens after it
    found = source.match(context) if source is not None else None
    return found is not None and found.length >= len(context) - 2


@pytest.fixture(autouse=True)
def mapped_bases(monkeypatch: pytest.MonkeyPatch) -> None:
    """These small bases mapped, as big ones are (smaller ones are copied when opened)."""
    monkeypatch.setattr(suffix_store, "COPY_BYTES", 0)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite"


@pytest.fixture
def stores(path: Path) -> Iterator[tuple[NgramStore, NgramStore]]:
    """The memory's connection to a store, and another (as index-repo in a shell has)."""
    mine, theirs = NgramStore.open(path, BYTES), NgramStore.open(path, BYTES)
    yield mine, theirs
    mine.close()
    theirs.close()


def fill(store: NgramStore) -> None:
    store.update_file("/ws/secret.py", "import os\n\n" + SECRET + "\nprint(1)\n")
    store.update_file("/ws/kept.py", "import sys\n\n" + KEPT + "\nprint(2)\n")


def copies(folder: Path) -> set[str]:
    """The inodes of the private copies of bases in ``folder`` that this process maps
    (suffix_store._private_copy: files without a name, which /proc lists as deleted)."""
    found = set()
    for line in Path("/proc/self/maps").read_text().splitlines():  # Linux
        fields = line.split(maxsplit=5)
        name = fields[5] if len(fields) == 6 else ""
        if name.startswith(f"{folder}/") and name.endswith("(deleted)"):
            found.add(fields[4])
    return found


# ----- the base file ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_a_base_file_matches_as_the_index_in_ram(path: Path, seed: int) -> None:
    rng = random.Random(seed)
    alphabet = rng.choice([3, 5, 40])
    streams = [[rng.randrange(alphabet) for _ in range(rng.randrange(0, 60))] for _ in range(6)]
    with NgramStore.open(path, BYTES) as store:
        store.write(
            [
                FileTokens(f"/f{i}.py", content_hash(str(s)), np.array(s, dtype=np.int64))
                for i, s in enumerate(streams)
            ]
        )
        assert write_base(store) == base_path(path)
    segment = open_base(path, BYTES.fingerprint, min_follow=2)
    assert segment is not None
    assert segment.index.backing is not None and copies(path.parent)  # mapped, a copy
    in_ram = SuffixIndex(streams, min_follow=2)  # the store's files sorted by path: f0..f5
    for _ in range(40):
        context = [rng.randrange(alphabet) for _ in range(rng.randrange(1, 12))]
        length, _ = segment.index.longest(context)
        assert length == brute_force_longest(streams, context)
        assert segment.index.match(context, others=2) == in_ram.match(context, others=2)


def test_the_base_file_is_private_and_written_by_index_repo(tmp_path: Path, path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.py").write_text("import os\n\n" + SECRET)
    (root / "b.py").write_text("import sys\n\n" + KEPT)
    with NgramStore.open(path, BYTES) as store:
        summary = index_repo(root, store, progress=False)
    base = base_path(path)
    assert summary.suffix_error is None and base.is_file()
    assert base.stat().st_mode & 0o777 == 0o600
    segment = open_base(path, BYTES.fingerprint)
    assert segment is not None and knows(segment.index, SECRET) and knows(segment.index, KEPT)


def test_accepted_drafts_stay_out_of_the_base_and_their_pruning_keeps_it(path: Path) -> None:
    with NgramStore.open(path, BYTES) as store:
        fill(store)
        store.update_file("accepted:0001", "x = compute_the_answer(41)\n")
        write_base(store)
        assert store.prune("accepted:", 0) == 1
    segment = open_base(path, BYTES.fingerprint)
    assert segment is not None and [p for p, _ in segment.files] == ["/ws/kept.py", "/ws/secret.py"]


# ----- another connection: what index-repo in a shell does ------------------------------------


@pytest.mark.parametrize("with_base", [False, True])
@pytest.mark.parametrize("how", ["forget", "clear"])
def test_forgetting_through_another_connection_reaches_the_next_use(
    stores: tuple[NgramStore, NgramStore], with_base: bool, how: str
) -> None:
    mine, theirs = stores
    fill(theirs)
    if with_base:
        write_base(theirs)
    memory = MatchIndexes(BYTES)
    before = memory.stores.store_index(mine)
    assert knows(before, SECRET) and knows(before, KEPT)
    if how == "forget":
        assert theirs.forget("/ws/secret.py") == 1
    else:
        theirs.clear()
    now = memory.stores.store_index(mine)  # no stores_changed: the store's change counter says it
    assert not knows(now, SECRET)
    assert not knows(before, SECRET)  # a request in flight stops matching it too
    memory.wait()
    later = memory.stores.store_index(mine)
    assert not knows(later, SECRET)
    assert knows(later, KEPT) == (how == "forget")


def test_text_written_through_another_connection_is_indexed_soon(
    stores: tuple[NgramStore, NgramStore],
) -> None:
    mine, theirs = stores
    theirs.update_file("/ws/kept.py", "import sys\n\n" + KEPT + "\nprint(2)\n")
    memory = MatchIndexes(BYTES)
    assert knows(memory.stores.store_index(mine), KEPT)
    theirs.update_file("/ws/secret.py", "import os\n\n" + SECRET + "\nprint(1)\n")
    memory.stores.store_index(mine)  # starts indexing it
    memory.wait()
    assert knows(memory.stores.store_index(mine), SECRET)


def test_a_changed_file_is_masked_at_once_and_its_new_text_follows(
    stores: tuple[NgramStore, NgramStore],
) -> None:
    mine, theirs = stores
    fill(theirs)
    write_base(theirs)
    memory = MatchIndexes(BYTES)
    assert knows(memory.stores.store_index(mine), SECRET)
    theirs.update_file("/ws/secret.py", "import os\n\n" + KEPT.replace("render", "draw") + "\n")
    assert not knows(memory.stores.store_index(mine), SECRET)
    memory.wait()
    now = memory.stores.store_index(mine)
    assert not knows(now, SECRET) and knows(now, KEPT.replace("render", "draw"))
    assert base_path(mine.path or "").is_file()  # a change is not a forget: the base stays


# ----- forgetting erases the suffix files -------------------------------------------------------


def suffix_files(path: Path) -> list[Path]:
    return [p for p in path.parent.iterdir() if p.name.startswith(path.name + "-suffix")]


def holds(files: list[Path], text: str) -> bool:
    """Whether a file holds ``text``'s tokens as the base stores them (int32)."""
    pattern = ids(text)[4:-4].astype("<i4").tobytes()
    return any(pattern in f.read_bytes() for f in files)


def test_after_forget_no_suffix_file_holds_the_forgotten_text(
    stores: tuple[NgramStore, NgramStore], path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, theirs = stores
    fill(theirs)
    write_base(theirs)
    orphan = base_path(path).with_name(f"{base_path(path).name}.{os.getpid()}-1.tmp")
    orphan.write_bytes(base_path(path).read_bytes())  # a base being written meanwhile
    assert holds(suffix_files(path), SECRET) and holds(suffix_files(path), KEPT)
    memory = MatchIndexes(BYTES)
    assert knows(memory.stores.store_index(mine), SECRET)
    held = copies(path.parent)
    assert held  # the base's private copy, mapped

    theirs.forget("/ws/secret.py")
    assert not holds(suffix_files(path), SECRET)
    monkeypatch.setattr(store_indexes, "INLINE_TOKENS", 10)  # so the refresh writes a base
    memory.stores.store_index(mine)  # sees the base gone: drops its mapping
    gc.collect()
    assert not held & copies(path.parent)  # the copy's blocks are freed

    memory.wait()
    assert base_path(path).is_file()
    assert holds(suffix_files(path), KEPT) and not holds(suffix_files(path), SECRET)
    assert not knows(memory.stores.store_index(mine), SECRET)


def test_the_servers_own_forget_masks_at_once(path: Path) -> None:
    """stores_changed(forgotten=True) (the server, after its forget command): masked before
    the next request, and in the source a request in flight holds."""
    with NgramStore.open(path, BYTES) as store:
        fill(store)
        write_base(store)
        memory = MatchIndexes(BYTES)
        in_flight = memory.stores.store_index(store)
        assert knows(in_flight, SECRET)
        held = copies(path.parent)
        assert held
        store.forget("/ws/secret.py")
        memory.stores.stores_changed(forgotten=True)
        assert not knows(in_flight, SECRET) and knows(in_flight, KEPT)
        del in_flight
        gc.collect()
        assert not held & copies(path.parent)


# ----- a store without a base, a damaged base -------------------------------------------------


def test_a_store_without_a_base_answers_at_once_and_gets_one(
    stores: tuple[NgramStore, NgramStore], path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, theirs = stores
    fill(theirs)
    monkeypatch.setattr(store_indexes, "INLINE_TOKENS", 10)  # a "big" store
    release = threading.Event()
    written = store_indexes.write_base

    def slow_write(store: NgramStore) -> Path | None:
        assert release.wait(30)
        return written(store)

    monkeypatch.setattr(store_indexes, "write_base", slow_write)
    memory = MatchIndexes(BYTES)
    assert memory.stores.store_index(mine) is None  # answered without it: not built on this thread
    assert not base_path(path).exists()
    release.set()
    memory.wait()
    assert base_path(path).is_file()
    assert knows(memory.stores.store_index(mine), SECRET)


def truncate(file: Path) -> None:
    with file.open("r+b") as handle:
        handle.truncate(file.stat().st_size // 2)


def flip_a_byte(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[len(data) - 9] ^= 0xFF  # in the suffix array
    file.write_bytes(bytes(data))


def garble_the_header(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[20:40] = b"\xff" * 20
    file.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [truncate, flip_a_byte, garble_the_header])
def test_a_damaged_base_is_detected_and_rebuilt(
    stores: tuple[NgramStore, NgramStore],
    path: Path,
    monkeypatch: pytest.MonkeyPatch,
    damage: Any,
) -> None:
    mine, theirs = stores
    fill(theirs)
    write_base(theirs)
    damage(base_path(path))
    with pytest.raises(suffix_store.BaseDamaged):
        open_base(path, BYTES.fingerprint)
    monkeypatch.setattr(store_indexes, "INLINE_TOKENS", 10)  # rebuilt as a base, not a delta
    memory = MatchIndexes(BYTES)
    memory.stores.store_index(mine)  # no crash: answered without it (or with the rebuilt one)
    memory.wait()
    assert open_base(path, BYTES.fingerprint) is not None
    assert knows(memory.stores.store_index(mine), SECRET)


def test_a_base_that_cannot_be_written_is_kept_in_ram(
    stores: tuple[NgramStore, NgramStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, theirs = stores
    fill(theirs)

    def refuse(store: NgramStore) -> Path | None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(store_indexes, "INLINE_TOKENS", 10)
    monkeypatch.setattr(store_indexes, "write_base", refuse)
    memory = MatchIndexes(BYTES)
    memory.stores.store_index(mine)
    memory.wait()
    assert knows(memory.stores.store_index(mine), SECRET)
    theirs.forget("/ws/secret.py")
    assert not knows(memory.stores.store_index(mine), SECRET)
