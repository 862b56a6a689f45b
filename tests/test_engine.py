"""The decoding engine on a tiny random Llama: invariants of superposed decoding and baselines."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import pytest
import torch

from superposed.api import Engine, find_method
from superposed.baselines import top_p_filter
from superposed.hypotheses import Hypothesis
from superposed.ngram import InMemoryNgramSource
from superposed.options import METHODS
from superposed.prompt import Prompt
from superposed.request import DecodeRequest, Plan
from superposed.runner import HFRunner, ModelRunner
from superposed.superposed import (
    rescore,
    select,
    superposed_decode,
    superposed_input,
    superposition_weights,
)
from superposed.types import (
    Cancelled,
    Deadline,
    DecodeConfig,
    Draft,
    EngineError,
    NonFiniteLogits,
    StopCondition,
)

CODE = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return"


def test_runner_shapes(tiny_engine: Engine) -> None:
    runner = tiny_engine.runner
    ids = tiny_engine.tokenizer.encode(CODE)
    logits = runner.prefill(ids)
    assert logits.shape == (runner.vocab_size,)
    assert runner.length == len(ids) and runner.cached_ids == ids
    embeds = runner.embed(torch.tensor([[5], [6], [7]]))
    assert embeds.shape == (3, 1, 64)
    runner.expand(3)
    assert runner.step(embeds).shape == (3, runner.vocab_size)
    runner.rewind(len(ids))
    assert runner.length == len(ids) and runner.cached_ids == ids


def test_embedding_path_equals_token_path(tiny_engine: Engine, tiny_loaded) -> None:
    """A superposition with one-hot weights is exactly the token's own embedding."""
    ids = tiny_engine.tokenizer.encode(CODE)
    by_ids = HFRunner(tiny_loaded.model).prefill(ids)
    runner = tiny_engine.runner
    runner.prefill(ids[:-1])
    # Two drafts whose newest tokens coincide: their weights add up to one.
    hyps = [Hypothesis([ids[-1]], -0.5), Hypothesis([ids[-1]], -1.5)]
    by_embeds = runner.step(superposed_input(runner, hyps))[0]
    torch.testing.assert_close(by_embeds, by_ids, rtol=0, atol=1e-5)


def test_gamma_is_a_distribution() -> None:
    gamma = superposition_weights(
        [Hypothesis([1], -0.1), Hypothesis([2], -3.0), Hypothesis([3], -9.0)]
    )
    assert math.isclose(float(gamma.sum()), 1.0, abs_tol=1e-12)
    assert gamma[0] > gamma[1] > gamma[2] > 0


@pytest.mark.parametrize("heal", [False, True])
def test_k1_without_ngrams_is_greedy(tiny_engine: Engine, heal: bool) -> None:
    cfg = DecodeConfig(k=1, alpha=0.0, max_new_tokens=12)
    prompt = tiny_engine.prompt(CODE, cfg.max_new_tokens, heal=heal)
    superposed = tiny_engine.complete(prompt, "superposed", cfg).drafts
    greedy = tiny_engine.complete(prompt, "greedy", cfg).drafts
    assert len(superposed) == len(greedy) == 1
    assert superposed[0].token_ids == greedy[0].token_ids
    assert superposed[0].text == greedy[0].text


def test_k_distinct_drafts_best_first(tiny_engine: Engine) -> None:
    drafts = tiny_engine.complete(CODE, "superposed", DecodeConfig(k=4, max_new_tokens=8)).drafts
    assert len(drafts) == 4
    assert len({tuple(d.token_ids) for d in drafts}) == 4
    scores = [d.score for d in drafts]
    assert scores == sorted(scores, reverse=True)


def test_deterministic_with_a_seed(tiny_loaded) -> None:
    cfg = DecodeConfig(k=3, seed=7, max_new_tokens=8)
    for method in ("superposed", "nucleus", "nucleus-sequential", "beam"):
        first = Engine(tiny_loaded).complete(CODE, method, cfg).drafts
        second = Engine(tiny_loaded).complete(CODE, method, cfg).drafts
        assert [d.token_ids for d in first] == [d.token_ids for d in second], method


def test_top_p_keeps_the_smallest_set_that_reaches_it() -> None:
    logits = torch.tensor([[0.5, 0.1, 0.25, 0.15], [0.97, 0.01, 0.01, 0.01]]).log()
    kept = top_p_filter(logits, 0.7).isfinite()
    assert kept.tolist() == [[True, False, True, False], [True, False, False, False]]
    # at 1.0 every token stays, even one whose mass float rounding puts past the cumulative 1
    tail = torch.tensor([[0.0] * 1000 + [-30.0]])
    assert torch.equal(top_p_filter(tail, 1.0), tail)


def test_nucleus_seeds_differ(tiny_loaded) -> None:
    runs = {
        tuple(
            tuple(d.token_ids)
            for d in Engine(tiny_loaded)
            .complete(
                CODE,
                "nucleus",
                DecodeConfig(k=3, seed=seed, nucleus_temperature=1.5, top_p=1.0, max_new_tokens=6),
            )
            .drafts
        )
        for seed in range(4)
    }
    assert len(runs) > 1


def test_every_method_returns_drafts_and_rewinds(tiny_engine: Engine) -> None:
    prompt_len = tiny_engine.prompt(CODE, 10).ids
    for method in (
        "superposed",
        "greedy",
        "nucleus",
        "nucleus-sequential",
        "beam",
        "nucleus-superposed",
    ):
        completion = tiny_engine.complete(CODE, method, DecodeConfig(k=3, max_new_tokens=8))
        assert completion.drafts, method
        assert all(d.token_ids for d in completion.drafts), method
        # The cache holds exactly the prompt again: no draft tokens pollute it.
        assert tiny_engine.runner.cached_ids == prompt_len, method
        assert tiny_engine.runner.length == len(prompt_len), method


def test_beam_width_one_is_greedy(tiny_engine: Engine) -> None:
    cfg = DecodeConfig(k=1, max_new_tokens=10)
    beam = tiny_engine.complete(CODE, "beam", cfg).drafts
    greedy = tiny_engine.complete(CODE, "greedy", cfg).drafts
    assert beam[0].token_ids == greedy[0].token_ids


def test_prompt_cache_reuse_gives_the_same_drafts(tiny_loaded) -> None:
    warm = Engine(tiny_loaded)
    warm.complete(CODE, "superposed")
    typed = CODE + " a * b"
    reused = warm.complete(typed, "superposed")
    fresh = Engine(tiny_loaded).complete(typed, "superposed")
    assert reused.reused_tokens > 0 and fresh.reused_tokens == 0
    assert [d.token_ids for d in reused.drafts] == [d.token_ids for d in fresh.drafts]
    for a, b in zip(reused.drafts, fresh.drafts, strict=True):
        assert math.isclose(a.score, b.score, rel_tol=1e-4, abs_tol=1e-4)


def test_single_line_stop(tiny_engine: Engine) -> None:
    cfg = DecodeConfig(k=3, max_new_tokens=20, temperature=1.0)
    for method in ("superposed", "greedy", "beam", "nucleus"):
        drafts = tiny_engine.complete(
            CODE, method, cfg, stop=StopCondition(single_line=True)
        ).drafts
        assert all("\n" not in d.text.lstrip() for d in drafts), method


def test_stop_condition_cut() -> None:
    stop = StopCondition(single_line=True, stop_strings=("#",))
    assert stop.cut("x = 1 # c\n") == "x = 1 "
    assert stop.cut("x = 1\ny") == "x = 1"
    assert stop.cut("x = 1") is None
    # A line break before any content does not end the draft: it is the next line.
    assert stop.cut("\n    return x") is None
    assert stop.cut("\n    return x\n") == "\n    return x"
    assert stop.cut("\n\n") is None


def test_cancel_between_steps(tiny_engine: Engine) -> None:
    calls = []

    def cancel() -> bool:
        calls.append(1)
        return len(calls) > 2

    with pytest.raises(Cancelled):
        tiny_engine.complete(CODE, "superposed", DecodeConfig(max_new_tokens=10), cancel=cancel)
    assert tiny_engine.runner.cached_ids == tiny_engine.prompt(CODE, 10).ids


def test_a_deadline_cuts_the_drafts_as_far_as_they_got(tiny_engine: Engine) -> None:
    """Issue 54 item 4: past its deadline a request stops once its drafts hold min_tokens,
    says it was cut, and leaves the prompt cached; a deadline never reached changes nothing."""
    cfg = DecodeConfig(k=3, max_new_tokens=12)
    prompt = tiny_engine.prompt(CODE, cfg.max_new_tokens)
    whole = tiny_engine.run(Plan(prompt, cfg=cfg))
    assert not whole.cut and max(len(d.token_ids) for d in whole.drafts) > 3
    due = Deadline(at=0.0, min_tokens=3)  # long past
    cut = tiny_engine.run(Plan(prompt, cfg=cfg, deadline=due))
    assert cut.cut and due.cut
    assert cut.drafts and all(len(d.token_ids) <= 3 for d in cut.drafts)
    assert any(not d.finished for d in cut.drafts)  # stopped, not ended
    assert tiny_engine.runner.cached_ids == prompt.ids
    later = tiny_engine.run(Plan(prompt, cfg=cfg, deadline=Deadline(at=math.inf)))
    assert not later.cut
    assert [d.token_ids for d in later.drafts] == [d.token_ids for d in whole.drafts]


def test_a_deadline_starts_no_step_that_would_end_past_it() -> None:
    """Steps of 100 ms asked at 0, 100, 200 ms, due at 250: the step from 200 would end at
    300, so the drafts stop at 200 (the deadline stopped only once passed, at 300: the answer
    came most of a step late)."""
    now = [0.0]
    due = Deadline(at=0.25, min_tokens=1, clock=lambda: now[0])
    stops = []
    for step in range(1, 5):
        stops.append(due.passed(step))
        now[0] += 0.1
    assert stops == [False, False, True, True] and due.cut


def test_a_deadline_keeps_its_minimum_of_tokens() -> None:
    now = [10.0]
    due = Deadline(at=0.0, min_tokens=3, clock=lambda: now[0])  # long past
    assert [due.passed(step) for step in (1, 2, 3)] == [False, False, True]


class StepFailsAt:
    """A runner whose n-th decoding step raises, as a model producing NaN mid-decode would."""

    def __init__(self, runner: ModelRunner, n: int) -> None:
        self.runner, self.n, self.calls = runner, n, 0

    def step(self, embeds: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == self.n:
            raise NonFiniteLogits(f"step {self.n} fails")
        return self.runner.step(embeds)

    def __getattr__(self, name: str) -> Any:  # everything else is the runner's own
        return getattr(self.runner, name)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("fails", ["cancel", "step"])
def test_a_method_raising_mid_decode_leaves_the_prompt_cached(
    tiny_engine: Engine, method: str, fails: str
) -> None:
    """Cancelled on the third check, or the second step failing: every method rewinds.

    nucleus-superposed fails inside its superposed pass, whose cache holds prompt + prefix.
    """
    prompt = tiny_engine.prompt(CODE, 10)
    checks: list[int] = []

    def cancel() -> bool:
        checks.append(1)
        return fails == "cancel" and len(checks) == 3

    runner = StepFailsAt(tiny_engine.runner, 2 if fails == "step" else 0)
    cfg, vocab = DecodeConfig(k=3, max_new_tokens=10), tiny_engine.vocab
    request = DecodeRequest(cast(ModelRunner, runner), vocab, prompt, cfg, cancel=cancel)
    with pytest.raises(Cancelled if fails == "cancel" else NonFiniteLogits):
        find_method(method)(request)
    assert (len(checks) == 3) if fails == "cancel" else (runner.calls == 2)
    assert tiny_engine.runner.cached_ids == prompt.ids
    assert tiny_engine.runner.length == len(prompt.ids)


def test_resets_keep_k_drafts(tiny_engine: Engine) -> None:
    drafts = tiny_engine.complete(
        CODE, "superposed", DecodeConfig(k=3, max_new_tokens=9, reset_every=3)
    ).drafts
    assert len(drafts) == 3
    assert all(len(d.token_ids) == 9 for d in drafts if not d.finished)
    # After a reset all drafts share the chosen prefix.
    assert len({tuple(d.token_ids[:3]) for d in drafts}) == 1


# --- bad input -------------------------------------------------------------------------


def test_empty_prefix_gives_drafts(tiny_engine: Engine) -> None:
    completion = tiny_engine.complete("", "superposed")
    assert len(completion.drafts) == 3
    assert completion.prompt_tokens == 1


def test_prefix_longer_than_context_keeps_recent_tokens(tiny_engine: Engine) -> None:
    text = "".join(f"value_{i} = compute({i})\n" for i in range(400)) + "result ="
    completion = tiny_engine.complete(text, "superposed", DecodeConfig(max_new_tokens=5))
    assert completion.prompt_tokens <= tiny_engine.max_context - 5
    prompt = tiny_engine.prompt(text, 5)
    tail = tiny_engine.vocab.decode(prompt.ids) + prompt.heal
    assert text.encode().endswith(tail)
    assert tail.startswith(b"value_") or tail.startswith(b"\n")  # starts at a line boundary


@pytest.mark.parametrize(
    "field, value",
    [("k", 0), ("max_new_tokens", 0), ("alpha", 1.5), ("temperature", 0.0), ("top_p", 0.0)],
)
def test_invalid_config_is_a_clear_error(tiny_engine: Engine, field: str, value: float) -> None:
    with pytest.raises(EngineError, match=field.replace("temperature", "temperature")):
        tiny_engine.complete(CODE, "superposed", DecodeConfig(**{field: value}))


def test_unknown_method(tiny_engine: Engine) -> None:
    with pytest.raises(EngineError, match="unknown method 'sampling'"):
        tiny_engine.complete(CODE, "sampling")


def test_non_finite_logits_are_a_clear_error(tokenizer, vocab, make_tiny_llama) -> None:
    from superposed.model import LoadedModel

    model = make_tiny_llama(len(tokenizer), seed=1)
    with torch.no_grad():
        model.lm_head.weight[0, 0] = float("nan")
    engine = Engine(LoadedModel("nan", model, tokenizer, vocab, torch.device("cpu"), torch.float32))
    with pytest.raises(NonFiniteLogits, match="float32"):
        engine.complete(CODE, "superposed")


# --- n-gram re-scoring ---------------------------------------------------------------


def test_rescore_arithmetic_by_hand() -> None:
    # Draft 0 has support: its context (7, 8) continued by 9 twice and by 4 once.
    source = InMemoryNgramSource.from_sequences([[7, 8, 9], [7, 8, 9], [7, 8, 4]], {2: 0.4, 3: 0.6})
    logp = torch.log(torch.tensor([[0.5, 0.3], [0.6, 0.2]], dtype=torch.float64))
    candidates = torch.tensor([[9, 4], [1, 2]])
    cfg = DecodeConfig(alpha=0.5, delta=200.0, mix="loglinear")  # the paper's mix
    scores = rescore(logp, candidates, [[7, 8], [5, 6]], cfg, source)
    # p_ngram(9 | 7 8) = 0.4 * 2/3 (order 2: ctx (8,) seen 3 times) + 0.6 * 2/3 = 2/3
    # p_ngram(4 | 7 8) = 0.4 * 1/3 + 0.6 * 1/3 = 1/3
    assert math.isclose(float(scores[0, 0]), 0.5 * math.log(0.5) + 0.5 * math.log(2 / 3))
    assert math.isclose(float(scores[0, 1]), 0.5 * math.log(0.3) + 0.5 * math.log(1 / 3))
    # Draft 1: context never seen, no support -> (1 - alpha) log p - delta.
    assert math.isclose(float(scores[1, 0]), 0.5 * math.log(0.6) - 200.0)
    assert math.isclose(float(scores[1, 1]), 0.5 * math.log(0.2) - 200.0)


def test_unseen_order_contributes_nothing() -> None:
    source = InMemoryNgramSource.from_sequences([[1, 2, 3]], {2: 0.25, 3: 0.75})
    result = source.probabilities([[9, 2]], np.array([[3, 5]]))
    # order 3 context (9, 2) is unseen: only order 2 (ctx (2,) -> 3 once of once) counts.
    assert result.probs[0, 0] == pytest.approx(0.25)
    assert result.probs[0, 1] == 0.0
    assert result.supported.tolist() == [True]
    # A context too short for any order has no support at all.
    assert source.probabilities([[]], np.array([[3]])).supported.tolist() == [False]


def test_candidate_without_ngram_support_loses_to_one_with() -> None:
    source = InMemoryNgramSource.from_sequences([[1, 2, 3]], {2: 1.0})
    logp = torch.log(torch.tensor([[0.9, 0.1]], dtype=torch.float64))
    cfg = DecodeConfig(alpha=0.5, mix="loglinear")
    scores = rescore(logp, torch.tensor([[4, 3]]), [[1, 2]], cfg, source)
    assert scores[0, 1] > scores[0, 0]  # the paper's mix: the unsupported token is vetoed
    assert scores[0, 0] == float("-inf")


def test_interpolated_mix_by_hand_keeps_an_unseen_candidate() -> None:
    """The default mix: (1 - alpha) p + alpha p_ngram, so the model's word can still win."""
    source = InMemoryNgramSource.from_sequences([[1, 2, 3]], {2: 1.0})
    logp = torch.log(torch.tensor([[0.9, 0.1]], dtype=torch.float64))
    scores = rescore(logp, torch.tensor([[4, 3]]), [[1, 2]], DecodeConfig(alpha=0.5), source)
    assert math.isclose(float(scores[0, 0]), math.log(0.5 * 0.9))  # unseen: no veto
    assert math.isclose(float(scores[0, 1]), math.log(0.5 * 0.1 + 0.5 * 1.0))
    assert scores[0, 0] > float("-inf")


def test_select_merges_identical_sequences(vocab) -> None:
    hyps = [Hypothesis([10], -1.0), Hypothesis([10], -2.0), Hypothesis([11], -3.0)]
    candidates = torch.tensor([[20, 21], [20, 22], [20, 23]])
    scores = torch.tensor([[-0.1, -0.5], [-0.1, -0.2], [-0.1, -0.3]], dtype=torch.float64)
    chosen = select(hyps, candidates, scores, 3, vocab)
    assert [h.tokens for h in chosen] == [[10, 20], [10, 21], [10, 22]]
    assert chosen[0].score == pytest.approx(-1.1)


def test_ngram_source_steers_superposed_drafts(tiny_engine: Engine) -> None:
    """With alpha close to 1 the drafts follow the n-gram statistics of a 'codebase'."""
    tok = tiny_engine.tokenizer
    # The first token comes from the model alone; the codebase decides what follows it.
    first = tiny_engine.complete(
        tiny_engine.prompt(CODE, 1, heal=False), "greedy", DecodeConfig(k=1, max_new_tokens=1)
    )
    continuation = first.drafts[0].token_ids + tok.encode(" Zebra_xyzzy(a)")
    source = InMemoryNgramSource.from_sequences([tok.encode(CODE) + continuation], {2: 1.0})
    every_token = len(tiny_engine.vocab)
    cfg = DecodeConfig(k=2, alpha=0.99, max_new_tokens=4, n_candidates=every_token)
    unhealed = tiny_engine.prompt(CODE, 4, heal=False)
    drafts = tiny_engine.complete(unhealed, "superposed", cfg, ngram=source).drafts
    assert drafts[0].token_ids == continuation[:4]


def test_superposed_decode_function_defaults(tiny_engine: Engine) -> None:
    prompt = Prompt(tiny_engine.tokenizer.encode(CODE))
    request = DecodeRequest(tiny_engine.runner, tiny_engine.vocab, prompt, DecodeConfig(k=2))
    drafts = superposed_decode(request)
    assert len(drafts) == 2


def test_select_merges_drafts_that_spell_the_same_text(tokenizer, vocab) -> None:
    """Different tokenizations of one text are one draft: the better-scored one stays."""
    whole = tokenizer.convert_tokens_to_ids("Hello")
    parts = [tokenizer.convert_tokens_to_ids(t) for t in ("Hel", "lo")]
    assert vocab.decode([whole]) == vocab.decode(parts)
    hyps = [Hypothesis([parts[0]], -1.0), Hypothesis([], -0.5)]
    candidates = torch.tensor([[parts[1], 11], [whole, 12]])
    scores = torch.tensor([[-0.1, -5.0], [-0.1, -6.0]], dtype=torch.float64)
    chosen = select(hyps, candidates, scores, 3, vocab)
    texts = [vocab.decode(h.tokens) for h in chosen]
    assert texts.count(b"Hello") == 1 and chosen[0].tokens == [whole]
    assert len(chosen) == 3


def test_timings_split_the_prompt_prefill_from_the_drafts_steps(tiny_loaded) -> None:
    """timing_ms says how much of a request was prefill (what the cache lacked) and how much
    the drafts' own decoding: a repeated request prefills only the token it recomputes."""
    engine = Engine(tiny_loaded)
    cold = engine.complete(CODE, "superposed")
    warm = engine.complete(CODE, "superposed")
    for completion in (cold, warm):
        timing = completion.timing_ms
        assert timing["prefill"] > 0 and timing["steps"] > 0
        assert math.isclose(timing["prefill"] + timing["steps"], timing["decode"], rel_tol=1e-9)
    assert warm.reused_tokens == warm.prompt_tokens - 1 and cold.reused_tokens == 0


def test_timings_count_the_decode_forwards(tiny_loaded) -> None:
    """timing_ms["forwards"] counts the decode steps run (issue 54 item 1): the runner's own
    ``step`` calls, the prefill not among them."""
    engine = Engine(tiny_loaded)
    calls = {"n": 0}
    step = engine.runner.step

    def counted(*args: Any) -> Any:
        calls["n"] += 1
        return step(*args)

    engine.runner.step = counted  # type: ignore[method-assign]
    completion = engine.complete(CODE, "superposed", cfg=DecodeConfig(max_new_tokens=7))
    assert completion.timing_ms["forwards"] == calls["n"] == 6  # the first token: the prefill's


def test_superposed_returns_once_settle_k_drafts_are_final(tiny_engine: Any) -> None:
    """settle_k: decoding ends when that many finished drafts beat every live one, not k
    (completion asks for the k shown, the spares decoded beside them need not finish)."""
    from superposed.types import DecodeConfig, StopCondition

    runner = tiny_engine.runner
    calls = {"n": 0}
    step = runner.step

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return step(*args, **kwargs)

    runner.step = counted
    stop = StopCondition(stop_strings=(" ",))  # the random model writes spaces often
    steps = {}
    try:
        for settle in (None, 1):
            calls["n"] = 0
            cfg = DecodeConfig(k=5, max_new_tokens=40, settle_k=settle)
            drafts = tiny_engine.complete("def main():\n    return", cfg=cfg, stop=stop).drafts
            steps[settle] = calls["n"]
            assert drafts
    finally:
        runner.step = step
    assert steps[1] < steps[None], steps


def _probe(request: DecodeRequest) -> list[Draft]:
    """A registered method that reports the memory it was given (as its first draft's text)."""
    return [Draft(repr(request.memory), [], 0.0, True)]


@pytest.mark.parametrize("takes_memory", [True, False])
def test_the_memory_goes_to_a_method_that_takes_it(
    tiny_engine: Engine, monkeypatch: pytest.MonkeyPatch, takes_memory: bool
) -> None:
    """Whether a method gets the memory is its registered capability, not its name."""
    from superposed import options

    entry = options.MethodEntry(f"{__name__}:_probe", takes_memory=takes_memory)
    monkeypatch.setitem(options.METHOD_TABLE, "probe", entry)
    memory: Any = "the memory"
    drafts = tiny_engine.complete(CODE, "probe", memory=memory).drafts
    assert drafts[0].text == (repr("the memory") if takes_memory else "None")
