"""Shared fixtures: the default tokenizer, a tiny random Llama on it, and the real model.

The tiny model (about 3M parameters, built in memory from a config) makes engine tests fast
and deterministic; tests marked ``model`` load the real default model once per session.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hypothesis import settings

from lsp_server import models
from superposed.api import Engine
from superposed.model import LoadedModel, default_model_dir, load_model
from superposed.vocab import Vocab

# Property tests run 300 examples each in `make test`; `make test-fast` loads the "fast" profile
# (--hypothesis-profile=fast), a quick check while editing. Tests whose examples are costly
# (a store per example) set a smaller count of their own.
settings.register_profile("thorough", max_examples=300, deadline=None)
settings.register_profile("fast", max_examples=40, deadline=None)
settings.load_profile("thorough")


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(default_model_dir())


@pytest.fixture(scope="session")
def vocab(tokenizer: Any) -> Vocab:
    return Vocab.from_tokenizer(tokenizer)


@pytest.fixture(scope="session")
def tokenizer_engine(tokenizer: Any) -> SimpleNamespace:
    """What building a prompt reads of an Engine: the real tokenizer and a context size."""
    return SimpleNamespace(tokenizer=tokenizer, max_context=2048, fim_tokens=None, name="t")


def tiny_llama(vocab_size: int, seed: int = 0) -> Any:
    """The server's tiny random Llama, with a short context (to test prompt truncation)."""
    return models.tiny_llama(vocab_size, seed, max_positions=256)


@pytest.fixture()
def one_thread() -> Iterator[None]:
    """One CPU thread, as the runner tests run: two on a loaded 2-core machine took 10x longer."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def make_tiny_llama() -> Any:
    """The tiny_llama factory, for tests that need a model of their own."""
    return tiny_llama


@pytest.fixture(scope="session")
def tiny_loaded(tokenizer: Any, vocab: Vocab) -> LoadedModel:
    torch.set_num_threads(1)
    model = tiny_llama(len(tokenizer))
    return LoadedModel("tiny-random", model, tokenizer, vocab, torch.device("cpu"), torch.float32)


@pytest.fixture()
def tiny_engine(tiny_loaded: LoadedModel) -> Engine:
    """A fresh engine (and KV cache) on the shared tiny model."""
    return Engine(tiny_loaded)


@pytest.fixture(scope="session")
def real_engine() -> Engine:
    """The default model, loaded once per test session."""
    return Engine(load_model())


def _heavy_imports(*modules: str) -> list[str]:
    """Which of torch, transformers and pygls importing ``modules`` loads, in a new process."""
    code = (
        f"import sys, {', '.join(modules)}; "
        "print(' '.join(sorted({'torch', 'transformers', 'pygls'} & set(sys.modules))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.fixture(scope="session")
def heavy_imports() -> Callable[..., list[str]]:
    """_heavy_imports, for the tests that keep a module light."""
    return _heavy_imports


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    """An empty workspace folder (the store tests' workspace root)."""
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture(scope="session")
def org_index(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Builds a shared infini-gram index (byte tokens) of one repository, org-client, whose
    client.py holds the code given; its folder (infini-gram's indexer runs as a process)."""
    from ngram_db.infini import build_index
    from ngram_db.tokenizer import ByteTokenizer

    def build(code: str) -> Path:
        base = tmp_path_factory.mktemp("shared")
        repo = base / "org-client"
        repo.mkdir()
        (repo / "client.py").write_text(code)
        build_index(base / "index", [repo], ByteTokenizer(), "bytes", cpus=1, mem_gib=1)
        return base / "index"

    return build
