"""A ModelRunner over llama.cpp's kernels (llama-cpp-python's low-level API), issue 39.

On a CPU without AMX, llama.cpp's decode step on the default model's GGUF measured 16.7 ms
against the fast runner's 38.7 ms (issue 39's table; bench/results/llama_cpp_runner.md has
this runner's own numbers through the engine). Superposed decoding runs on it unchanged:
a step takes input embeddings (``llama_batch.embd``), so the superposition of the k drafts'
embeddings is fed as it is, and the n-gram mixing stays in Python.

Rows are llama.cpp sequences in one unified KV cache: ``expand`` copies sequence 0 into the
others (``llama_memory_seq_cp`` shares the prompt's cells, nothing is copied), ``select``
reorders them through scratch sequences, ``rewind`` cuts every sequence
(``llama_memory_seq_rm``). One batch holds either tokens or embeddings, so the prompt and
the steps are separate ``llama_decode`` calls.

``embed`` reads the embedding table the product converted from the same GGUF (fp32, as
llama.cpp's get_rows de-quantizes Q8_0), so a token's embedding fed as a step gives its
id's logits (tests/test_llama_cpp_runner.py). Needs the ``llama`` extra: `make bench-llama`.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any

import numpy as np
import torch

from superposed.embedded import embedded
from superposed.own_model import gguf_model
from superposed.runner import check_finite
from superposed.types import EngineError

ROWS = 16  # sequences a decoder may use at once (DecodeConfig.k at most); as many for select
CONTEXT = 2048  # positions one sequence may reach (the prompt and its drafts)
ROW_CELLS = 128  # KV cells per row beyond the shared prompt: its own new tokens
BATCH = 512  # tokens per llama_decode call of a prefill
GRAVE = 2 * ROWS  # the sequence holding the cells of rows select dropped, until a rewind


def import_llama() -> Any:
    """llama_cpp, or EngineError saying how to install it."""
    try:
        import llama_cpp
    except ImportError as error:  # also a build for another CPU's instructions
        raise EngineError(
            f"runner llama.cpp needs llama-cpp-python, which does not import ({error}): "
            "run `make bench-llama` (or `pip install .[llama]`; a build of 10-25 minutes), "
            "or use runner fast"
        ) from error
    return llama_cpp


@functools.cache
def _silent_log(ll: Any) -> Any:
    """A llama.cpp log callback that drops every line, made once for the process: llama.cpp
    keeps the pointer and calls it on any later load, so it must outlive every runner (one
    owned by a closed runner was freed with it, and the next ``llama_cpp.Llama`` crashed)."""
    return ll.llama_log_callback(lambda level, text, data: None)


def gguf_for(model: str) -> Path:
    """The GGUF file llama.cpp loads for ``model``: the user's own (a GGUF path, an Ollama
    name: own_model.py), or an embedded model's shipped as one file; EngineError for others."""
    from superposed.model import _gguf_path

    own = gguf_model(model)
    if own is not None:
        return own.path
    entry = embedded(model)
    if entry is None or not entry.gguf_file:
        raise EngineError(
            f"runner llama.cpp runs a GGUF file (a path, ollama:NAME, or the default model), "
            f"not {model!r}: use runner fast"
        )
    return _gguf_path(entry, Path("/nonexistent"))  # shipped whole: nothing is assembled


class LlamaCppRunner:
    """The ModelRunner on llama.cpp: one model, one context, rows as sequences."""

    def __init__(
        self, gguf: Path, embedding: torch.Tensor, threads: int = 1, context: int = CONTEXT
    ) -> None:
        """embedding: the token embedding table [V, H] fp32 that llama.cpp reads from
        ``gguf`` (the product's checkpoint of it). threads: llama.cpp's CPU threads."""
        ll = self.ll = import_llama()
        ll.llama_backend_init()
        ll.llama_log_set(_silent_log(ll), ctypes.c_void_p())  # its load log goes to stderr
        self._model = ll.llama_model_load_from_file(
            str(gguf).encode(), ll.llama_model_default_params()
        )
        if not self._model:
            raise EngineError(f"llama.cpp could not load {gguf}: reinstall the model's package")
        self.vocab_size = int(ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self._model)))
        self.hidden = int(ll.llama_model_n_embd(self._model))
        if tuple(embedding.shape) != (self.vocab_size, self.hidden):
            raise EngineError(
                f"the embedding table {tuple(embedding.shape)} is not {gguf.name}'s "
                f"({self.vocab_size}, {self.hidden}): the checkpoint is another model's"
            )
        self._embedding = embedding.float().contiguous()  # [V, H]
        self.max_context = min(context, int(ll.llama_model_n_ctx_train(self._model)))
        params = ll.llama_context_default_params()
        params.n_ctx = self.max_context + (ROWS - 1) * ROW_CELLS
        params.n_batch = BATCH
        params.n_seq_max = GRAVE + 1  # ROWS in use, ROWS of scratch for select, GRAVE
        params.kv_unified = True  # the rows share the prompt's cells
        params.n_threads = params.n_threads_batch = threads
        self._ctx = ll.llama_init_from_model(self._model, params)
        if not self._ctx:
            ll.llama_model_free(self._model)
            raise EngineError("llama.cpp could not make a context (out of memory?)")
        self._memory = ll.llama_get_memory(self._ctx)
        self._tokens = ll.llama_batch_init(BATCH, 0, 1)
        self._embeds = ll.llama_batch_init(BATCH, self.hidden, 1)
        self.device = torch.device("cpu")
        self._ids: list[int] = []  # prompt tokens in row 0
        self._length = 0
        self._rows = 1

    def set_threads(self, threads: int) -> None:
        """llama.cpp's CPU threads from now on, for steps and batches alike."""
        self.ll.llama_set_n_threads(self._ctx, threads, threads)

    def close(self) -> None:
        """Free llama.cpp's context and model (the runner is unusable after)."""
        ll = self.ll
        ll.llama_batch_free(self._tokens)
        ll.llama_batch_free(self._embeds)
        ll.llama_free(self._ctx)
        ll.llama_model_free(self._model)

    # --- the cache ------------------------------------------------------------------------

    @property
    def length(self) -> int:
        return self._length

    @property
    def cached_ids(self) -> list[int]:
        return self._ids

    @property
    def rows(self) -> int:
        return self._rows

    def _copy(self, source: int, target: int) -> None:
        """Sequence ``target`` made to hold ``source``'s cells (shared, not copied)."""
        self.ll.llama_memory_seq_rm(self._memory, target, -1, -1)
        self.ll.llama_memory_seq_cp(self._memory, source, target, -1, -1)

    def expand(self, batch: int) -> None:
        if self._rows != 1:
            raise ValueError("expand replicates the single prompt row: rewind first")
        if batch > ROWS:
            raise EngineError(f"runner llama.cpp holds at most {ROWS} rows (asked {batch})")
        for seq in range(1, batch):
            self._copy(0, seq)
        self._rows = max(batch, 1)

    def select(self, rows: torch.Tensor) -> None:
        order = [int(r) for r in rows.tolist()]
        if not order or any(not 0 <= r < self._rows for r in order):
            raise ValueError(f"select rows {order} not among the cache's {self._rows}")
        for new, old in enumerate(order):  # into scratch first: a row may move onto another
            self._copy(old, ROWS + new)
        for seq in set(range(self._rows)) - set(order):
            # A dropped row's cells stay taken (until a rewind): llama.cpp 0.3.36 put a later
            # step of a row into such a hole before that row's older cells, and its logits
            # came out 0.5 off (tests/test_llama_cpp_runner.py, select([2, 0])).
            self.ll.llama_memory_seq_cp(self._memory, seq, GRAVE, -1, -1)
        for seq in range(self._rows):
            self.ll.llama_memory_seq_rm(self._memory, seq, -1, -1)
        for new in range(len(order)):
            self._copy(ROWS + new, new)
            self.ll.llama_memory_seq_rm(self._memory, ROWS + new, -1, -1)
        self._rows = len(order)

    def rewind(self, length: int) -> None:
        if length <= 0:
            self.ll.llama_memory_clear(self._memory, True)
            self._ids, self._length, self._rows = [], 0, 1
            return
        for seq in [*range(1, self._rows), GRAVE]:  # row 0 holds the prompt: the rest go
            self.ll.llama_memory_seq_rm(self._memory, seq, -1, -1)
        self._rows = 1
        if length < self._length:
            self.ll.llama_memory_seq_rm(self._memory, 0, length, -1)
            self._length = length
        self._ids = self._ids[: self._length]

    # --- the forward ----------------------------------------------------------------------

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding(ids.cpu(), self._embedding)  # [B, T, H]

    @staticmethod
    def _place(batch: Any, i: int, pos: int, seq: int, logits: bool) -> None:
        batch.pos[i] = pos
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = seq
        batch.logits[i] = logits

    def _decode(self, batch: Any, n: int, outputs: int) -> torch.Tensor:
        """The batch's first ``n`` entries through the model -> fp32 logits [outputs, V]."""
        batch.n_tokens = n
        status = self.ll.llama_decode(self._ctx, batch)
        if status == 1:
            raise EngineError(
                "runner llama.cpp has no room left in its KV cache: shorten the prompt "
                "or the drafts"
            )
        if status != 0:
            raise EngineError(f"llama.cpp failed to decode (status {status})")
        pointer = self.ll.llama_get_logits(self._ctx)
        logits = np.ctypeslib.as_array(pointer, (outputs, self.vocab_size))
        return check_finite(torch.from_numpy(logits.copy()))

    def _room(self, positions: int) -> None:
        if positions > self.max_context:
            raise EngineError(
                f"{positions} positions exceed runner llama.cpp's context of "
                f"{self.max_context}: shorten the prompt"
            )

    def prefill(self, ids: list[int]) -> torch.Tensor:
        if not ids:
            raise ValueError("prefill needs at least one token")
        if self._rows != 1:
            raise ValueError("prefill extends the single prompt row: rewind first")
        self._room(self._length + len(ids))
        start = self._length
        for offset in range(0, len(ids), BATCH):
            chunk = ids[offset : offset + BATCH]
            for i, token in enumerate(chunk):
                self._tokens.token[i] = token
                self._place(self._tokens, i, self._length + i, 0, i == len(chunk) - 1)
            logits = self._decode(self._tokens, len(chunk), 1)
            self._length += len(chunk)
        if len(self._ids) == start:  # row 0 is all prompt: remember its tokens
            self._ids = self._ids + list(ids)
        return logits[0]

    def step(self, embeds: torch.Tensor) -> torch.Tensor:
        b = embeds.shape[0]
        if b != self._rows:
            raise ValueError(f"step got {b} rows, the cache has {self._rows}")
        self._room(self._length + 1)
        x = np.ascontiguousarray(embeds.reshape(b, self.hidden).float().cpu().numpy())  # [B, H]
        ctypes.memmove(self._embeds.embd, x.ctypes.data, x.nbytes)
        for seq in range(b):
            self._place(self._embeds, seq, self._length, seq, True)
        logits = self._decode(self._embeds, b, b)  # [B, V]
        self._length += 1
        return logits

    def score(self, ids: torch.Tensor) -> torch.Tensor:
        b, t = ids.shape
        if b != self._rows:
            raise ValueError(f"score got {b} rows, the cache has {self._rows}")
        if b * t > BATCH:
            raise EngineError(f"runner llama.cpp scores at most {BATCH} tokens at once")
        self._room(self._length + t)
        for seq, row in enumerate(ids.tolist()):
            for j, token in enumerate(row):
                i = seq * t + j
                self._tokens.token[i] = token
                self._place(self._tokens, i, self._length + j, seq, True)
        logits = self._decode(self._tokens, b * t, b * t)  # [B * T, V], in batch order
        self._length += t
        return logits.reshape(b, t, -1)
