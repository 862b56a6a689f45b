"""Random-weight GGUF files of a model's shapes, written with the gguf package, no download.

What the tests convert and load (tiny models of each architecture the fast runner implements:
a Qwen2 with attention biases and FIM tokens, a Llama, a Gemma 3; and a Qwen3, which only the
transformers runner runs), and what
``bench/cpu_anchor.py --qwen-shapes`` runs beside llama.cpp (Qwen2.5-Coder-0.5B's shapes).
The files are laid out as llama.cpp's convert_hf_to_gguf.py writes them: its tensor names,
Gemma's norms stored as 1 + weight, the tokenizer in the ``tokenizer.ggml.*`` keys
(a byte-level BPE, ``gpt2``, trained here on a few lines of code and padded with unused
tokens to the vocabulary size), so transformers' GGUF loader and llama.cpp both read them.
The weights are random (normal, std 0.02; norms near 1), so drafts are noise, but every
shape, and so every cost, is the real model's.

    .venv/bin/python -m bench.gguf_models --shapes qwen2.5-coder-0.5b --out /tmp/q.gguf
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6  # llama.cpp's token types
STD = 0.02  # the weights' standard deviation (transformers' initializer_range)

# What the tokenizer is trained on: enough code for a few hundred merges.
CORPUS = '''import os
import sys
from pathlib import Path


def read_config(path):
    """Read the configuration file."""
    with open(path) as handle:
        return handle.read()


class Store:
    def __init__(self, root, name="default"):
        self.root = Path(root)
        self.name = name
        self.items = {}

    def get(self, key, default=None):
        return self.items.get(key, default)

    def set(self, key, value):
        self.items[key] = value
        return value


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    config = read_config(os.environ.get("CONFIG", "config.toml"))
    store = Store(os.getcwd())
    for index, arg in enumerate(args):
        store.set(index, arg)
    print(config, store.get(0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
'''


@dataclass(frozen=True)
class Shapes:
    """A decoder's shapes, as a GGUF file states them (``arch``: its general.architecture)."""

    arch: str  # llama | qwen2 | gemma3
    name: str  # general.name
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int  # tokens, the trained ones padded with unused ones up to this
    context: int = 512
    rope_theta: float = 10000.0
    eps: float = 1e-6
    tied: bool = True  # no output.weight: the head is the embedding
    attention_bias: bool = False  # q/k/v biases (Qwen2)
    sliding_window: int = 0  # Gemma 3's local layers
    specials: tuple[str, ...] = ("<|endoftext|>",)  # control tokens; the first one is EOS
    pre: str = "qwen2"  # tokenizer.ggml.pre: the pre-tokenizer's split
    tokenizer: str = "gpt2"  # tokenizer.ggml.model: byte-level BPE, or "llama" (sentencepiece)
    trained: int = 320  # tokens the BPE learns (at most; a small corpus stops earlier)


GEMMA_SPECIALS = ("<pad>", "<eos>", "<bos>", "<unk>", "<mask>")  # ids 0-4, as in Gemma 3
QWEN_FIM = ("<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|im_end|>")
TINY = {
    "qwen2": Shapes(
        "qwen2",
        "Tiny Qwen2.5 Coder",
        64,
        128,
        2,
        4,
        2,
        16,
        400,
        attention_bias=True,
        specials=QWEN_FIM,
        rope_theta=1e6,
    ),
    "llama": Shapes(
        "llama",
        "Tiny Llama",
        64,
        128,
        2,
        4,
        2,
        16,
        360,
        specials=("<|end_of_text|>", "<|begin_of_text|>"),
        pre="llama-bpe",
        tied=False,
    ),
    "gemma3": Shapes(
        # Six layers: the sixth is Gemma 3's global one, the others see 16 positions.
        "gemma3",
        "Tiny Gemma 3",
        64,
        128,
        6,
        4,
        1,
        16,
        640,
        sliding_window=16,
        tokenizer="llama",
        specials=GEMMA_SPECIALS,
        pre="default",
    ),
}
QWEN25_CODER_05B = Shapes(
    "qwen2",
    "Qwen2.5 Coder 0.5B shapes (random weights)",
    896,
    4864,
    24,
    14,
    2,
    64,
    151936,
    context=32768,
    rope_theta=1e6,
    attention_bias=True,
    specials=QWEN_FIM,
)
# Qwen3: the fast runner does not implement its per-head q/k norms (the transformers runner's case).
TINY["qwen3"] = Shapes("qwen3", "Tiny Qwen3", 64, 128, 2, 4, 2, 128, 400, rope_theta=1e6)
QK_NORM = ("gemma3", "qwen3")  # architectures with per-head query and key norms
SHAPES = {"qwen2.5-coder-0.5b": QWEN25_CODER_05B} | {f"tiny-{k}": v for k, v in TINY.items()}


def byte_level_vocab(shapes: Shapes) -> tuple[list[str], list[str], list[int]]:
    """(tokens, merges, token types) of a byte-level BPE trained on CORPUS, padded with
    unused tokens to ``shapes.vocab``, the control tokens last."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=shapes.trained, initial_alphabet=alphabet, show_progress=False
    )
    tokenizer.train_from_iterator([CORPUS], trainer)
    model = json.loads(tokenizer.to_str())["model"]
    tokens = [t for t, _ in sorted(model["vocab"].items(), key=lambda item: item[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    unused = shapes.vocab - len(tokens) - len(shapes.specials)
    if unused < 0:
        raise ValueError(f"vocab {shapes.vocab} is smaller than the trained tokenizer's")
    tokens += [f"ĠunusedĠ{i}" for i in range(unused)]  # never merged into: never produced
    types = [NORMAL] * len(tokens) + [CONTROL] * len(shapes.specials)
    return tokens + list(shapes.specials), merges, types


def sentencepiece_vocab(shapes: Shapes) -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, token types) as Gemma's GGUF files hold them: the control tokens
    first, then the 256 byte-fallback pieces, then pieces ("▁" for a space) learned on
    CORPUS, padded with unused pieces; transformers rebuilds the merges from their order."""
    from tokenizers import SentencePieceBPETokenizer

    learner = SentencePieceBPETokenizer(replacement="▁", add_prefix_space=False)
    learner.train_from_iterator([CORPUS], vocab_size=shapes.trained, show_progress=False)
    model = json.loads(learner.to_str())["model"]
    pieces = [t for t, _ in sorted(model["vocab"].items(), key=lambda item: item[1])]
    tokens = [*shapes.specials, *(f"<0x{b:02X}>" for b in range(256)), *pieces]
    unused = shapes.vocab - len(tokens)
    if unused < 0:
        raise ValueError(f"vocab {shapes.vocab} is smaller than the learned pieces'")
    tokens += [f"<unused{i}>" for i in range(unused)]
    types = [UNKNOWN if t == "<unk>" else CONTROL for t in shapes.specials]
    types += [BYTE] * 256 + [NORMAL] * (len(pieces) + unused)
    return tokens, [-float(i) for i in range(len(tokens))], types


def tensor_shapes(shapes: Shapes) -> dict[str, tuple[int, ...]]:
    """GGUF tensor name -> its shape in numpy's order ([out, in] for a matrix)."""
    h, hd = shapes.hidden, shapes.head_dim
    q, kv = shapes.heads * hd, shapes.kv_heads * hd
    out: dict[str, tuple[int, ...]] = {"token_embd.weight": (shapes.vocab, h)}
    for i in range(shapes.layers):
        b = f"blk.{i}."
        out |= {
            b + "attn_norm.weight": (h,),
            b + "attn_q.weight": (q, h),
            b + "attn_k.weight": (kv, h),
            b + "attn_v.weight": (kv, h),
            b + "attn_output.weight": (h, q),
            b + "ffn_norm.weight": (h,),
            b + "ffn_gate.weight": (shapes.intermediate, h),
            b + "ffn_up.weight": (shapes.intermediate, h),
            b + "ffn_down.weight": (h, shapes.intermediate),
        }
        if shapes.attention_bias:
            out |= {b + "attn_q.bias": (q,), b + "attn_k.bias": (kv,), b + "attn_v.bias": (kv,)}
        if shapes.arch in QK_NORM:
            out |= {b + "attn_q_norm.weight": (hd,), b + "attn_k_norm.weight": (hd,)}
        if shapes.arch == "gemma3":
            out |= {
                b + "post_attention_norm.weight": (h,),
                b + "post_ffw_norm.weight": (h,),
            }
    out["output_norm.weight"] = (h,)
    if not shapes.tied:
        out["output.weight"] = (shapes.vocab, h)
    return out


def _metadata(writer: Any, shapes: Shapes) -> None:
    """The architecture's keys, as llama.cpp's converter writes them."""
    w = writer
    w.add_name(shapes.name)
    w.add_context_length(shapes.context)
    w.add_embedding_length(shapes.hidden)
    w.add_block_count(shapes.layers)
    w.add_feed_forward_length(shapes.intermediate)
    w.add_head_count(shapes.heads)
    w.add_head_count_kv(shapes.kv_heads)
    w.add_layer_norm_rms_eps(shapes.eps)
    w.add_rope_freq_base(shapes.rope_theta)
    w.add_vocab_size(shapes.vocab)
    if shapes.arch in QK_NORM:
        w.add_key_length(shapes.head_dim)
        w.add_value_length(shapes.head_dim)
    else:
        w.add_rope_dimension_count(shapes.head_dim)
    if shapes.sliding_window:
        w.add_sliding_window(shapes.sliding_window)


def _tokenizer(writer: Any, shapes: Shapes) -> None:
    """The tokenizer's keys (tokenizer.ggml.*), what transformers' GGUF loader reads."""
    w = writer
    w.add_tokenizer_model(shapes.tokenizer)
    w.add_tokenizer_pre(shapes.pre)
    if shapes.tokenizer == "llama":
        tokens, scores, types = sentencepiece_vocab(shapes)
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        for key in ("pad", "eos", "bos", "unk"):
            getattr(w, f"add_{key}_token_id")(tokens.index(f"<{key}>"))
        w.add_add_bos_token(True)
        w.add_add_space_prefix(False)
    else:
        tokens, merges, types = byte_level_vocab(shapes)
        w.add_token_list(tokens)
        w.add_token_merges(merges)
        w.add_eos_token_id(tokens.index(shapes.specials[0]))
        w.add_add_bos_token(False)
    w.add_token_types(types)


def _values(rng: np.random.Generator, name: str, shape: tuple[int, ...], arch: str) -> np.ndarray:
    """Random values for tensor ``name``: norms near 1 (Gemma's stored as 1 + weight, as
    llama.cpp stores them), biases and matrices normal with std STD."""
    values = rng.standard_normal(shape, dtype=np.float32) * STD
    if name.endswith("norm.weight"):
        values += 1.0  # Gemma's weight w is stored as 1 + w: near 1 either way
    return values


def write_gguf(shapes: Shapes, path: Path, quant: str = "F32", seed: int = 0) -> Path:
    """Write a random-weight GGUF of ``shapes`` to ``path``; ``quant``: the matrices' type
    (F32, Q8_0, Q4_0; vectors stay F32, as llama.cpp keeps them)."""
    import gguf

    qtype = gguf.GGMLQuantizationType[quant]
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), shapes.arch)
    _metadata(writer, shapes)
    _tokenizer(writer, shapes)
    writer.add_file_type(int(getattr(gguf.LlamaFileType, f"MOSTLY_{quant}", 0)))
    for name, shape in tensor_shapes(shapes).items():
        values = _values(rng, name, shape, shapes.arch)
        if len(shape) == 2 and qtype != gguf.GGMLQuantizationType.F32:
            packed = gguf.quants.quantize(values, qtype)
            writer.add_tensor(name, packed, raw_dtype=qtype)
        else:
            writer.add_tensor(name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def tiny(model: str, **changes: object) -> Shapes:
    """The tiny test model ``model`` (a TINY key), with ``changes`` to its shapes."""
    return replace(TINY[model], **changes)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", choices=sorted(SHAPES), default="qwen2.5-coder-0.5b")
    parser.add_argument("--quant", default="Q8_0", choices=["F32", "Q8_0", "Q4_0"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    print(write_gguf(SHAPES[args.shapes], args.out, args.quant))


if __name__ == "__main__":
    main()
