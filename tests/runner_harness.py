"""What the runner tests share: tiny random models of the Llama family (transformers, in memory)
and a script of every call a decoder makes on a runner."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import torch

from lsp_server import models
from superposed.runner import ModelRunner

VOCAB = 512


def tiny(kind: str = "llama", seed: int = 0, max_positions: int = 1024) -> Any:
    """A 2-layer random model of the Llama family: llama, or qwen2 (q/k/v biases)."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    shape: dict[str, Any] = dict(
        vocab_size=VOCAB, max_position_embeddings=max_positions, **models.TINY_SHAPE
    )
    if kind == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**shape, tie_word_embeddings=False))
        with torch.no_grad():  # random init leaves biases at zero: make them matter
            for layer in model.model.layers:
                layer.self_attn.q_proj.bias.normal_()
                layer.self_attn.k_proj.bias.normal_()
        return model.eval()
    return LlamaForCausalLM(LlamaConfig(**shape, tie_word_embeddings=True)).eval()


@cache
def tiny_tokenizer() -> Any:
    """A byte-level BPE tokenizer of exactly VOCAB tokens, trained on the engine's source: the
    tiny models' own, so a saved tiny model loads (and its Vocab builds) in milliseconds rather
    than the default tokenizer's 49,152 tokens in about a second."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    source = Path(__file__).parents[1] / "superposed"
    corpus = [path.read_text() for path in sorted(source.glob("*.py"))]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")
    assert len(tokenizer) == VOCAB, len(tokenizer)
    return tokenizer


def ids(n: int, seed: int = 1) -> list[int]:
    return torch.randint(0, VOCAB, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def script(runner: ModelRunner) -> list[torch.Tensor]:
    """Drive a runner through every call a decoder makes; return all the logits it gave."""
    tokens = ids(63)
    out = [runner.prefill(tokens[:30]), runner.prefill(tokens[30:40])]
    runner.expand(3)
    out.append(runner.step(runner.embed(torch.tensor([[1], [2], [3]]))))
    runner.select(torch.tensor([2, 0]))
    out.append(runner.step(runner.embed(torch.tensor([[4], [5]]))))
    runner.expand(2)  # 2 rows -> 4
    out.append(runner.step(runner.embed(torch.tensor([[6], [7], [8], [9]]))))
    runner.rewind(40)
    superposed = runner.embed(torch.tensor([[10, 11]])).mean(1, keepdim=True)  # [1, 1, H]
    out.append(runner.step(superposed))
    runner.rewind(35)  # back into the prompt, as when the user deleted text
    out.append(runner.prefill(tokens[35:60]))
    out.append(runner.prefill(tokens[60:63]))  # a few tokens: the fast runner's decode weights
    return out
