"""The fast runners' parts on their own: the shared attention, its masks, the KV cache, and
the engine's modules importing one another without a circle."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest
import torch

import superposed
from superposed.attention import eager_mask, split_attention, step_masks, window_start
from superposed.kv_cache import KVCache
from superposed.types import EngineError


@pytest.mark.parametrize(
    ("heads", "kv_heads", "new", "capacity", "filled"),
    [
        (4, 4, 1, 8, 5),  # a decode step
        (4, 2, 3, 10, 6),  # grouped queries, a few new tokens
        (6, 1, 5, 16, 16),  # one kv head, a full cache
        (4, 2, 4, 12, 0),  # nothing cached yet
    ],
)
def test_split_attention_is_causal_attention_over_the_concatenated_keys(
    heads: int, kv_heads: int, new: int, capacity: int, filled: int
) -> None:
    generator = torch.Generator().manual_seed(heads * 100 + new)

    def normal(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator)

    b, d = 2, 8
    q = normal(b, heads, new, d)
    cached_keys, cached_values = normal(b, kv_heads, capacity, d), normal(b, kv_heads, capacity, d)
    keys, values = normal(b, kv_heads, new, d), normal(b, kv_heads, new, d)
    unwritten = torch.arange(capacity) >= filled  # [C]
    later = torch.ones(new, new, dtype=torch.bool).triu(1)  # [T, T]
    got = split_attention(q, cached_keys, cached_values, keys, values, unwritten, later, d**-0.5)

    all_keys = torch.cat([cached_keys[:, :, :filled], keys], dim=2)  # [B, kv, filled + T, D]
    all_values = torch.cat([cached_values[:, :, :filled], values], dim=2)
    queries = torch.arange(filled, filled + new)[:, None]  # [T, 1]
    causal = torch.arange(filled + new)[None, :] <= queries  # [T, filled + T]
    expected = torch.nn.functional.scaled_dot_product_attention(
        q, all_keys, all_values, attn_mask=causal, enable_gqa=kv_heads != heads
    )  # [B, heads, T, D]
    assert got.shape == (b, new, heads * d)
    torch.testing.assert_close(got, expected.transpose(1, 2).reshape(b, new, heads * d))


def test_kv_cache_gathers_expands_and_rewinds_rows() -> None:
    cache = KVCache(2, 1, 4, 300, torch.float32, torch.device("cpu"), static=False)
    cache.reserve(1, 3)
    assert cache.capacity == 128 and cache.rows == 1
    keys = torch.arange(2 * 3 * 4, dtype=torch.float32).view(2, 1, 1, 3, 4)  # [L, B, kv, T, D]
    cache.write(0, keys, -keys)
    cache.length = 3
    cache.expand(3)
    assert cache.rows == 3
    for layer in range(2):
        k, v = cache.read(layer, 3)
        assert k.shape == (3, 1, 3, 4)
        assert torch.equal(k, keys[layer].expand(3, -1, -1, -1)) and torch.equal(v, -k)
    step = torch.full((3, 1, 1, 4), 7.0)  # one new position, a value per row
    step[1] = 8.0
    cache.write(3, step, step, layer=1)
    cache.length = 4
    cache.gather(torch.tensor([1, 0]))
    assert cache.rows == 2
    assert cache.read(1, 4)[0][:, 0, 3, 0].tolist() == [8.0, 7.0]
    all_keys, _ = cache.views()
    assert len(all_keys) == 2 and all_keys[0].shape == (2, 1, 128, 4)
    cache.rewind(2)
    assert (cache.rows, cache.length) == (1, 2)
    assert torch.equal(cache.read(0, 2)[0][0], keys[0, 0, :, :2])
    with pytest.raises(EngineError, match="context"):
        cache.reserve(1, 301)
    cache.rewind(0)  # a growing cache starts again from nothing
    assert cache.capacity == 0


@pytest.mark.parametrize("window", [None, 1, 3, 6])
@pytest.mark.parametrize(("start", "tokens"), [(0, 1), (0, 5), (4, 1), (4, 3), (9, 4)])
def test_the_eager_and_the_pure_attention_see_the_same_keys(
    window: int | None, start: int, tokens: int
) -> None:
    """What a query sees, per the eager path's SDPA mask over the keys it reads and per the
    compiled step's masks over the whole cache and the new keys, is one set: the keys at
    or before it, and within the window."""
    end, capacity = start + tokens, 16
    queries = torch.arange(start, end)[:, None]  # [T, 1]
    keys = torch.arange(end)[None, :]  # [1, end]
    expected = keys <= queries
    if window is not None:
        expected &= keys > queries - window

    first = window_start(window, start)
    mask = eager_mask(window, start, end, torch.device("cpu"))
    eager = torch.zeros(tokens, end, dtype=torch.bool)
    if "attn_mask" in mask:
        eager[:, first:] = mask["attn_mask"]
    elif mask.get("is_causal"):
        eager[:, first:] = torch.ones(tokens, end - first, dtype=torch.bool).tril()
    else:  # one query sees every key it reads
        assert tokens == 1
        eager[:, first:] = True
    assert torch.equal(eager, expected)

    old, new = step_masks(window, torch.tensor([start]), tokens, capacity)
    pure = torch.cat([~old.expand(tokens, capacity)[:, :start], ~new], dim=1)  # [T, end]
    assert torch.equal(pure, expected)


def _runtime_imports(path: Path) -> set[str]:
    """The engine modules ``path`` imports when it runs (not under TYPE_CHECKING)."""
    package = superposed.__name__
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for statement in child.orelse:
                    visit(statement)
                continue
            if isinstance(child, ast.ImportFrom) and child.module:
                if child.module == package:
                    found.update(alias.name for alias in child.names)
                elif child.module.startswith(package + "."):
                    found.add(child.module.removeprefix(package + ".").split(".")[0])
            visit(child)

    visit(ast.parse(path.read_text()))
    return found - {path.stem}


def test_no_engine_modules_import_each_other() -> None:
    """fast_runner.py imported fast_gemma.py, which imports it (issue 26): the runners now
    build on one another one way (runner_choice.py picks between them)."""
    folder = Path(superposed.__file__).parent
    graph = {path.stem: _runtime_imports(path) for path in folder.glob("*.py")}
    assert "fast_gemma" in graph["runner_choice"] and "fast_gemma" not in graph["fast_runner"]
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"engine modules import each other: {' -> '.join(error.args[1])}")
