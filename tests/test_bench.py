"""The benchmarks' metrics, splits, sampling, execution check and report helpers."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bench import coherence, humaneval, metrics, split, tables
from bench import common as C

# ----- metrics --------------------------------------------------------------------------------


def test_exact_match_normalises_whitespace_only() -> None:
    assert metrics.exact_match(["x  =  f( a )"], "x = f( a )")
    assert metrics.exact_match(["nope", "return x\t"], "return x")
    assert not metrics.exact_match(["x = f(a)"], "x = f( a )")
    assert not metrics.exact_match([], "x")


def test_edit_similarity_is_one_minus_levenshtein_over_max_length() -> None:
    assert metrics.edit_similarity("kitten", "sitting") == pytest.approx(1 - 3 / 7)
    assert metrics.edit_similarity("", "") == 1.0
    assert metrics.edit_similarity("abc", "") == 0.0


def test_chars_saved_is_the_common_prefix_share() -> None:
    assert metrics.chars_saved("return x + 1", "return y") == pytest.approx(7 / 8)
    assert metrics.chars_saved("", "abc") == 0.0
    assert metrics.chars_saved("abcdef", "abc") == 1.0


def test_line_metrics_separate_first_draft_from_best_of_k() -> None:
    m = metrics.line_metrics(["x = 2", "x = 1   "], "x = 1")
    assert m["em1"] == 0.0 and m["emk"] == 1.0
    assert m["esk"] == 1.0 and m["es1"] == pytest.approx(0.8)
    assert m["empty"] == 0.0 and m["empty_any"] == 0.0
    empty = metrics.line_metrics(["", "x"], "x")
    assert empty["empty"] == 1.0 and empty["emk"] == 1.0


def test_distinct_ratio_counts_repeated_ngrams() -> None:
    assert metrics.distinct_ratio([1, 1, 1], 1) == pytest.approx(1 / 3)
    assert metrics.distinct_ratio([1, 2, 1, 2], 2) == pytest.approx(2 / 3)
    assert math.isnan(metrics.distinct_ratio([1], 2))


def test_self_bleu_is_high_for_identical_and_low_for_disjoint_drafts() -> None:
    assert metrics.self_bleu(["return a + b", "return a + b"]) == pytest.approx(100.0)
    assert metrics.self_bleu(["for x in y", "import os, sys"]) < 10.0
    assert math.isnan(metrics.self_bleu(["only one"]))


# ----- bootstrap ------------------------------------------------------------------------------


def test_bootstrap_interval_contains_the_mean_and_narrows_with_more_items() -> None:
    rng = np.random.default_rng(1)
    small = metrics.bootstrap_ci(list(rng.random(20)))
    large = metrics.bootstrap_ci(list(rng.random(2000)))
    for ci in (small, large):
        assert ci["lo"] <= ci["mean"] <= ci["hi"]
    assert large["hi"] - large["lo"] < small["hi"] - small["lo"]
    const = metrics.bootstrap_ci([0.5] * 10)
    assert const["lo"] == const["hi"] == 0.5


def test_bootstrap_drops_nan_and_pairs_differences() -> None:
    assert metrics.bootstrap_ci([1.0, float("nan"), 3.0])["n"] == 2
    assert metrics.bootstrap_ci([])["n"] == 0
    diff = metrics.paired_diff_ci([1.0, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0])
    assert diff["mean"] == pytest.approx(0.75) and diff["lo"] > 0


# ----- the split and the tasks ----------------------------------------------------------------


def test_bucket_is_stable_and_in_range() -> None:
    assert split.bucket("asyncio") == split.bucket("asyncio")
    values = {split.bucket(f"unit{i}") for i in range(300)}
    assert values <= set(range(100)) and len(values) > 50


def test_split_keeps_whole_packages_together_and_skips_tests(tmp_path: Path) -> None:
    for rel in [
        "pkg/__init__.py",
        "pkg/sub/deep.py",
        "pkg/tests/test_x.py",
        "test/test_os.py",
        "encodings/cp1252.py",
        "mod.py",
        "test_top.py",
        "data.txt",
    ] + [f"m{i}.py" for i in range(60)]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    parts = split.library_files(tmp_path)
    every = [f for files in parts.values() for f in files]
    names = {str(f) for f in every}
    assert "pkg/tests/test_x.py" not in names and "test/test_os.py" not in names
    assert "encodings/cp1252.py" not in names and "test_top.py" not in names
    assert "data.txt" not in names and "pkg/sub/deep.py" in names
    part = {str(f): p for p, files in parts.items() for f in files}
    assert part["pkg/__init__.py"] == part["pkg/sub/deep.py"] == split.part_of(Path("pkg/x.py"))
    assert len(every) == 63
    assert parts["test"] and parts["train"]  # 63 units: both sides are non-empty


def test_line_tasks_put_the_cursor_after_the_indentation() -> None:
    text = "def f(x):\n\n    return x + 1  \n"
    tasks = split.line_tasks("f.py", text)
    assert len(tasks) == 1  # the first line has no prompt; blank lines are no task
    (t,) = tasks
    assert t.prompt == "def f(x):\n\n    " and t.target == "return x + 1" and t.line == 2
    assert text.startswith(t.prompt + t.target)


def test_sample_tasks_is_deterministic_and_smaller_samples_are_prefixes() -> None:
    files = {f"f{i}.py": "".join(f"x{j} = {j}\n" for j in range(30)) for i in range(5)}
    big = split.sample_tasks(files, 40, seed=3)
    assert big == split.sample_tasks(files, 40, seed=3)
    assert split.sample_tasks(files, 10, seed=3) == big[:10]
    assert split.sample_tasks(files, 10, seed=4) != big[:10]
    assert len({(t.source, t.line) for t in big}) == 40


# ----- running a spec -------------------------------------------------------------------------


def test_run_spec_times_the_ngram_lookups(tiny_engine: Any, tokenizer: Any) -> None:
    from superposed.ngram import InMemoryNgramSource

    ids = tokenizer.encode("def add(a, b):\n    return a + b\n" * 3, add_special_tokens=False)
    sources = {"codebase": InMemoryNgramSource.from_sequences([ids])}
    text = "def add(a, b):\n    "
    C.warm_cache(tiny_engine, text, 4, 64)
    with_store = C.run_spec(
        tiny_engine, C.Spec("s", "superposed", 2, 0.5, 0.1, "codebase"), text, sources, 4
    )
    plain = C.run_spec(tiny_engine, C.Spec("g", "greedy", 1), text, sources, 4)
    assert len(with_store.drafts) == 2 and len(plain.drafts) == 1
    assert with_store.lookup_ms > 0 and plain.lookup_ms == 0
    assert with_store.lookup_ms <= with_store.total_ms


# ----- HumanEval ------------------------------------------------------------------------------


def test_humaneval_canonical_line_passes_and_a_wrong_line_fails() -> None:
    items = humaneval.load_items()
    assert len(items) == 1033
    item = items[0]
    task = humaneval.task_of(item)
    assert item["canonical_solution"].strip() == task.target
    assert task.prompt.endswith(item["canonical_solution"][: -len(task.target) - 1])
    ok = humaneval.program(item, task, task.target)
    bad = humaneval.program(item, task, "return None")
    verdict = humaneval.run_all([ok, bad, ok])
    assert verdict == {ok: True, bad: False}


def test_humaneval_time_limit_fails_a_hanging_program() -> None:
    assert not humaneval.passes("while True:\n    pass\n", timeout=0.3)
    assert humaneval.passes("assert 1 + 1 == 2\n")


# ----- coherence ------------------------------------------------------------------------------


def test_sample_prefixes_have_room_for_the_draft() -> None:
    files = [list(range(30)), list(range(100, 110)), list(range(200, 260))]
    prefixes = coherence.sample_prefixes(files, 50, seed=0)
    assert prefixes == coherence.sample_prefixes(files, 50, seed=0)
    assert all(len(p) == coherence.PREFIX_TOKENS for p in prefixes)
    assert all(p[0] < 100 or p[0] >= 200 for p in prefixes)  # the 10-token file is too short
    assert all(p[-1] + coherence.DRAFT_TOKENS <= 29 or p[0] >= 200 for p in prefixes)


def test_perplexity_matches_the_models_own_loss(tiny_loaded: Any) -> None:
    model = tiny_loaded.model
    prefix, draft = [5, 17, 99, 4], [8, 8, 301]
    ids = torch.tensor([prefix + draft])
    labels = ids.clone()
    labels[0, : len(prefix)] = -100  # score only the draft's tokens
    with torch.no_grad():
        loss = model(input_ids=ids, labels=labels).loss
    assert coherence.perplexity(model, prefix, draft) == pytest.approx(
        math.exp(float(loss)), rel=1e-4
    )
    assert math.isnan(coherence.perplexity(model, prefix, []))


# ----- the report -----------------------------------------------------------------------------


def test_verdict_reads_the_interval() -> None:
    assert "supported" in tables.verdict({"mean": 0.1, "lo": 0.02, "hi": 0.2})
    assert "not shown" in tables.verdict({"mean": 0.1, "lo": -0.02, "hi": 0.2})
    assert "contradicted" in tables.verdict({"mean": -0.1, "lo": -0.2, "hi": -0.01})
    assert "supported" in tables.verdict({"mean": -1.0, "lo": -2.0, "hi": -0.5}, "lower")


def test_a_difference_is_read_either_way_round_from_the_comparisons() -> None:
    comps = [{"a": "x", "b": "y", "metric": "emk", "mean": 0.1, "lo": -0.05, "hi": 0.2, "n": 9}]
    assert tables.difference(comps, "x", "y", metric="emk")["mean"] == 0.1
    flipped = tables.difference(comps, "y", "x", metric="emk")
    assert (flipped["mean"], flipped["lo"], flipped["hi"], flipped["n"]) == (-0.1, -0.2, 0.05, 9)
    assert tables.difference(comps, "x", "y", metric="esk") is None


def test_table_aligns_the_columns_it_is_told() -> None:
    text = tables.table(["name", "ms"], [["a", 1], ["b", 22]], align="lr")
    assert text.splitlines() == ["| name | ms |", "|---|---:|", "| a | 1 |", "| b | 22 |"]
    assert tables.table(["x", "y"], []).splitlines()[1] == "|---|---|"


def test_hypotheses_are_found_by_the_role_of_the_spec_not_its_label() -> None:
    from bench import report_quality

    main = {"method": "superposed", "store": "codebase", "name": "main"}
    specs = [
        main,
        {"method": "greedy", "store": None, "name": "plain"},
        # an ablation of the same role, listed after the main methods: not a hypothesis's b
        {"method": "greedy", "store": None, "name": "plain, no healing"},
    ]
    comps = [
        {"a": "main", "b": "plain, no healing", "metric_a": "emk", "mean": 1.0},
        {"a": "main", "b": "plain", "metric_a": "esk", "mean": 2.0},
        {"a": "main", "b": "plain", "metric_a": "emk", "mean": 3.0},
    ]
    data = {"specs": specs, "methods": {"main": {}, "plain": {}}, "comparisons": comps}
    assert report_quality.comparison(data, "greedy", "emk")["mean"] == 3.0
    assert report_quality.comparison(data, "nostore", "emk") is None


def test_every_section_of_the_report_template_is_filled_or_refused() -> None:
    assert {"document", "nextline", "humaneval", "coherence", "replay"} <= set(tables.PROSE)
    assert "%%" not in "".join(t.template for t in tables.PROSE.values())
    with pytest.raises(KeyError):
        tables.say("store_build", rate="1")  # no $seconds: an error, never a blank


def test_the_standard_library_is_the_running_pythons(monkeypatch: pytest.MonkeyPatch) -> None:
    import sysconfig

    monkeypatch.delenv("BENCH_STDLIB", raising=False)
    assert split.stdlib_root() == Path(sysconfig.get_paths()["stdlib"])
    assert (split.stdlib_root() / "argparse.py").is_file()
    monkeypatch.setenv("BENCH_STDLIB", "/elsewhere")
    assert split.stdlib_root() == Path("/elsewhere")


def test_generic_renders_lists_of_rows_as_tables() -> None:
    text = tables.generic({"machine": "x", "rows": [{"k": 1, "ms": 12.5}, {"k": 3, "ms": 30.0}]})
    assert "| machine | x |" in text
    assert "| k | ms |" in text and "| 3 | 30 |" in text
    assert tables.pct({"mean": 0.5, "lo": 0.25, "hi": 0.75, "n": 4}) == "50.0 [25.0, 75.0]"
    assert tables.pct({"mean": float("nan"), "lo": 0, "hi": 0, "n": 0}) == "n/a"


# ----- fast-path benchmarks (issue 7) ----------------------------------------------------------


def test_perplexity_change_is_the_ratio_of_per_token_perplexities() -> None:
    from bench.fidelity import perplexity_change

    # 2 positions of 4 tokens: the fast drafts cost 0.4 nats more in all.
    out = perplexity_change([2.2, 2.2], [2.0, 2.0], [4, 4])
    assert out["change"] == pytest.approx(math.exp(0.4 / 8) - 1)
    assert out["lo"] <= out["change"] <= out["hi"] and out["n"] == 2
    assert perplexity_change([1.0], [1.0], [3])["change"] == 0.0


def test_teacher_forced_greedy_reads_the_forced_tokens() -> None:
    """Forced tokens, not the runner's own argmax, are fed back, so agreement counts each
    position once; the free-running variant feeds its own argmax."""
    from bench.fidelity import greedy

    class Runner:  # logits whose argmax is the last input token + 1
        def __init__(self) -> None:
            self.fed: list[int] = []

        def prefill(self, ids: list[int]) -> torch.Tensor:
            return torch.nn.functional.one_hot(torch.tensor(ids[-1] + 1), 50).float()

        def embed(self, ids: torch.Tensor) -> torch.Tensor:
            return ids

        def step(self, token: torch.Tensor) -> torch.Tensor:
            self.fed.append(int(token))
            return torch.nn.functional.one_hot(token[0, 0] + 1, 50).float()[None]

        def rewind(self, length: int) -> None:
            pass

    free, forced = Runner(), Runner()
    assert greedy(free, [3], 4) == [4, 5, 6, 7] and free.fed == [4, 5, 6]
    assert greedy(forced, [3], 4, forced=[10, 20, 30, 40]) == [4, 11, 21, 31]
    assert forced.fed == [10, 20, 30]


def test_the_typing_target_compares_medians_of_the_same_calls() -> None:
    import bench.lsp_latency as L

    calls = [(300.0, {"steps": 200.0, "prefill": 50.0}), (100.0, {"steps": 90.0, "prefill": 5.0})]
    calls.append((200.0, {"steps": 150.0, "prefill": 20.0}))
    out = L.typing_target(calls)
    assert out["p50_request_ms"] == 200.0 and out["p50_steps_ms"] == 150.0
    assert out["ratio_p50"] == pytest.approx(200 / 150) and out["calls"] == 3
    rows = ["x" * 99] * 100  # 100 characters a line with its newline
    assert L.prompt_1500_line(rows) == 54  # the first line after 5,400 characters
    with pytest.raises(ValueError, match="too short"):
        L.prompt_1500_line(rows[:10])


# ----- repository-history replay (bench/replay.py) -------------------------------------------


def test_replay_metrics_compare_the_rest_of_the_line() -> None:
    from bench import replay

    m = replay.position_metrics(["x = 2\nmore", "x = 1   ", ""], "x = 1")
    assert m["em1"] == 0.0 and m["emk"] == 1.0  # trailing spaces and later lines do not count
    assert m["esk"] == 1.0 and m["csk"] == 1.0
    assert m["distinct"] == 2.0 and m["empty"] == 0.0
    # Leading whitespace is part of the rest at a mid-line cursor: " = 1" is not "= 1".
    assert replay.position_metrics(["= 1"], " = 1")["em1"] == 0.0
    none = replay.position_metrics(["", "  "], "return x")
    assert none["empty"] == 1.0 and none["distinct"] == 0.0 and none["csk"] == 0.0


def test_likeness_of_drafts_shared_prefix_and_pairwise_distance() -> None:
    assert metrics.shared_prefix_share(["tb_offset", "tb_data", "tb"]) == pytest.approx(2 / 9)
    assert metrics.shared_prefix_share(["abc", "abc", "abcd"]) == 1.0  # the others extend it
    assert math.isnan(metrics.shared_prefix_share(["abc"]))  # one draft: nothing to compare
    assert math.isnan(metrics.shared_prefix_share(["", "x"]))
    assert metrics.pairwise_distance(["ab", "ab"]) == 0.0
    # pairs (ab, ab) 0, (ab, xy) 1, (ab, xy) 1: the mean over the three pairs
    assert metrics.pairwise_distance(["ab", "ab", "xy"]) == pytest.approx(2 / 3)
    assert math.isnan(metrics.pairwise_distance(["ab"]))


def test_replay_likeness_per_request_and_what_drafts_two_to_k_add() -> None:
    from bench import replay

    rest = "return self.x"
    m = replay.position_metrics(["return self.y", "return self.x", "return self.x  # ok"], rest)
    assert m["gain"] == 1.0  # draft 2 is right where draft 1 is not
    assert m["prefix"] == pytest.approx(12 / 13) and m["close"] == 1.0
    assert 0 < m["apart"] < 0.5
    first = replay.position_metrics(["return self.x", "pass"], rest)
    assert first["gain"] == 0.0 and first["close"] == 0.0  # nothing shared: not close
    alone = replay.position_metrics(["return self.x"], rest)
    assert math.isnan(alone["prefix"]) and math.isnan(alone["close"])
    rows = [{"config": "c", "cursor": "line-start", "ms": 1.0, "verbatim": False,
             "in_file": False, **m} for m in (m, first, alone)]  # fmt: skip
    cell = replay.summarize(rows)["c"]["line-start"]["all"]
    assert cell["gain"]["mean"] == pytest.approx(1 / 3)
    assert cell["close"]["n"] == 2  # a request with one draft has no likeness


def test_replay_chars_saved_is_the_best_drafts_accepted_prefix() -> None:
    from bench import replay

    m = replay.position_metrics(["return s", "return self.x"], "return self.y")
    assert m["csk"] == pytest.approx(12 / 13)
    assert m["es1"] == pytest.approx(metrics.edit_similarity("return s", "return self.y"))


def test_replay_positions_cut_the_line_and_mark_where_it_occurs() -> None:
    from bench import replay

    document = "a = 1\nb = a + 1\nb = a + 1\n"
    data = {
        "split": {"test": ["o/r"], "validation": []},
        "repos": {"o/r": {"files": {"x.py": "a = 1\n"}}},
        "documents": {"d": document},
        "tasks": [
            {
                "id": "o/r#0",
                "repo": "o/r",
                "path": "x.py",
                "line": 1,
                "text": "b = a + 1",
                "document": "d",
                "cursors": {"line-start": 0, "mid-line": 5},
            },
            {
                "id": "o/r#1",
                "repo": "o/r",
                "path": "x.py",
                "line": 0,
                "text": "a = 1",
                "document": "d",
                "cursors": {"line-start": 0, "mid-line": 1},
            },
        ],
    }
    got = replay.positions(data, "test")
    assert [(p.task, p.cursor) for p in got] == [
        ("o/r#0", "line-start"), ("o/r#0", "mid-line"), ("o/r#1", "line-start"),
        ("o/r#1", "mid-line"),
    ]  # fmt: skip
    mid = got[1]
    assert mid.document == "a = 1\nb = a\nb = a + 1\n" and mid.rest == " + 1"
    assert mid.in_file and not mid.verbatim  # the same line follows; the snapshot lacks it
    assert got[2].verbatim and not got[2].in_file
    assert len(replay.positions(data, "test", per_repo=1)) == 2
    assert replay.positions(data, "validation") == []


def test_replay_configurations_from_presets_and_definitions() -> None:
    from bench import replay_driver

    got = replay_driver.parse_configs("greedy,mine", ['mine={"alpha": 0.3, "store": false}'])
    assert got[0].options == {"method": "greedy", "k": 1} and got[0].store
    assert got[1].options == {"alpha": 0.3} and not got[1].store
    with pytest.raises(SystemExit, match="unknown configuration"):
        replay_driver.parse_configs("nope", [])
    with pytest.raises(SystemExit, match="not JSON"):
        replay_driver.parse_configs("x", ["x={alpha}"])
    with pytest.raises(SystemExit, match="unknown setting superposed.alhpa"):
        replay_driver.parse_configs("x", ['x={"alhpa": 0.3}'])


def test_replay_comparisons_pair_the_same_positions() -> None:
    from bench import replay

    def row(config: str, task: str, emk: float, em1: float) -> dict[str, Any]:
        return {"config": config, "task": task, "cursor": "line-start", "emk": emk,
                "em1": em1, "esk": emk, "csk": emk}  # fmt: skip

    rows = [row("a", "t1", 1, 0), row("a", "t2", 1, 1), row("greedy", "t1", 0, 0),
            row("greedy", "t2", 1, 1)]  # fmt: skip
    comps = replay.compare(rows, ["a", "greedy"])
    vs_em1 = next(
        c
        for c in comps
        if (c["metric_a"], c["metric_b"], c["cursor"]) == ("emk", "em1", "line-start")
    )
    assert vs_em1["mean"] == pytest.approx(0.5) and vs_em1["n"] == 2
    empty = next(c for c in comps if c["cursor"] == "mid-line")
    assert empty["n"] == 0


def test_replay_report_section_renders_a_small_run() -> None:
    from bench import replay, report_replay

    rows = []
    runs = (("superposed+store", True), ("superposed-nostore", False), ("greedy", False))
    for config, hit in runs:
        for task in ("o/r#0", "o/r#1"):
            for cursor in replay.CURSORS:
                drafts = ["x = 1"] if hit else ["y"]
                rows.append({"config": config, "task": task, "repo": "o/r", "cursor": cursor,
                             "verbatim": task == "o/r#0", "in_file": False, "rest": "x = 1",
                             "drafts": drafts, "ms": 10.0 if hit else 9.0,
                             **replay.position_metrics(drafts, "x = 1")})  # fmt: skip
    names = ["superposed+store", "superposed-nostore", "greedy"]
    result = {
        "_file": "bench/results/replay.json",
        "data": {"file": "bench/data/replay.json.gz", "split": "test", "targets": 2,
                 "positions": 4, "splits": {"test": ["o/r"], "validation": ["v/w"]},
                 "repos": {"o/r": {"snapshot": "abcdef1234", "snapshot_date": "2024-12-01",
                                   "cutoff": "2025-01-01"}}},
        "stores": {"repos": {"o/r": {"tokens": 1000}}},
        "settings": {"k": 3}, "configs": {n: {"options": {}, "store": True} for n in names},
        "summary": replay.summarize(rows), "comparisons": replay.compare(rows, names),
        "rows": rows,
    }  # fmt: skip
    text = report_replay.replay_section(result)
    assert text.startswith("## 1. Repository-history replay")
    assert "EM@3 beats greedy EM@1 by at least 5 points at the line start: **met**" in text
    assert "lines verbatim in the snapshot, EM@3 at least 50% (line start): **met**" in text
    assert "with the store beats without at EM@3 (line start): **supported**" in text
    assert "10 ms / 9 ms = 1.11x" in text
    assert "| superposed+store | 2 | 100.0 [100.0, 100.0] |" in text


def test_replay_report_shows_how_alike_the_drafts_are() -> None:
    from bench import replay, report_replay

    rows = []
    shown = {"superposed+store": ["x = 2", "x = 1", "y"], "superposed-close": ["x = 2", "x = 2,"]}
    for config, drafts in shown.items():
        for task in ("o/r#0", "o/r#1"):
            for cursor in replay.CURSORS:
                rows.append({"config": config, "task": task, "repo": "o/r", "cursor": cursor,
                             "verbatim": False, "in_file": False, "rest": "x = 1",
                             "drafts": drafts, "ms": 10.0,
                             **replay.position_metrics(drafts, "x = 1")})  # fmt: skip
    names = list(shown)
    result = {
        "_file": "bench/results/replay.json",
        "data": {"file": "d", "split": "test", "targets": 2, "positions": 4,
                 "splits": {"test": ["o/r"], "validation": ["v/w"]},
                 "repos": {"o/r": {"snapshot": "abcdef1234", "snapshot_date": "2024-12-01",
                                   "cutoff": "2025-01-01"}}},
        "stores": {"repos": {"o/r": {"tokens": 1000}}},
        "settings": {"k": 3}, "configs": {n: {"options": {}, "store": True} for n in names},
        "summary": replay.summarize(rows), "comparisons": replay.compare(rows, names),
        "rows": rows,
    }  # fmt: skip
    text = report_replay.replay_section(result)
    assert "### How alike the drafts are (issue 22)" in text
    assert "| superposed-close | line-start | 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] |" in text
    # the drafts as shown add EM@k - EM@1: "x = 1" second in every request, never first
    row = next(r for r in text.splitlines() if r.startswith("| superposed+store | line-start |"))
    assert row.endswith("| 0.0 [0.0, 0.0] | 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] |")


# ----- issue 23: block tasks ------------------------------------------------------------------


def test_replay_block_positions_remove_the_run_and_mark_repeats() -> None:
    from bench import replay_blocks as RB

    document = "class A:\n    def f(self):\n        a = 1\n        return a\n\n    x = 2\n"
    cut, line, column, target = RB.remove_block(document, 2, 2, "block-start")
    assert cut == "class A:\n    def f(self):\n        \n\n    x = 2\n"
    assert (line, column) == (2, 8) and target == "a = 1\n        return a"
    cut, line, column, target = RB.remove_block(document, 2, 2, "opener")
    assert cut == "class A:\n    def f(self):\n\n    x = 2\n"
    assert (line, column) == (1, len("    def f(self):")) and target.startswith("\n        a = 1")
    with pytest.raises(ValueError, match="needs a line before"):
        RB.remove_block(document, 0, 2, "opener")
    twin = "def g():\n    a = 1\n\n    return a\n"  # the same lines, a blank line between
    data = {
        "split": {"test": ["o/r"], "validation": []},
        "repos": {"o/r": {"files": {"s.py": "a = 1\nreturn a\n"}}},
        "documents": {"d": document, "t": twin + document},
        "tasks": [
            {"id": "o/r#b0", "repo": "o/r", "path": "x.py", "line": 2,
             "lines": ["        a = 1", "        return a"], "document": "d",
             "cursors": {"block-start": 8, "opener": [1, 16]}},
            {"id": "o/r#b1", "repo": "o/r", "path": "x.py", "line": 1,
             "lines": ["    def f(self):", "        a = 1"], "document": "d",
             "cursors": {"block-start": 4, "opener": None}},
            {"id": "o/r#b2", "repo": "o/r", "path": "x.py", "line": 6,
             "lines": ["        a = 1", "        return a"], "document": "t",
             "cursors": {"block-start": 8, "opener": None}},
        ],
    }  # fmt: skip
    got = RB.block_positions(data, "test", cursors=RB.BLOCK_CURSORS)
    assert [(p.task, p.cursor) for p in got] == [
        ("o/r#b0", "block-start"), ("o/r#b0", "opener"), ("o/r#b1", "block-start"),
        ("o/r#b2", "block-start"),
    ]  # fmt: skip
    assert got[0].verbatim and not got[0].twin  # the snapshot has it; the document no more
    assert not got[2].verbatim and not got[2].twin
    assert got[3].twin and got[3].lines == 2
    assert len(RB.block_positions(data, "test", per_repo=1)) == 1


def test_block_lines_accepted_stop_at_the_first_wrong_line() -> None:
    target = "a = 1\n    b = 2\n    return a + b"
    assert metrics.lines_accepted("a = 1  \n    b = 2\n    return b", target) == 2
    assert metrics.lines_accepted("a = 1\n  b = 2\n    return a + b", target) == 1  # indent
    assert metrics.lines_accepted("a = 2\n    b = 2\n    return a + b", target) == 0
    assert metrics.lines_accepted(target + "\n\n    more = 3", target) == 3  # runs on: all kept
    assert metrics.lines_accepted("a = 1", target) == 1  # one line: one
    opener = "\n    a = 1\n    b = 2"  # a cursor at an opener's end: the newline is not a line
    assert metrics.lines_accepted("\n    a = 1\n    c", opener) == 1
    assert metrics.lines_accepted("x\n    a = 1", opener) == 0


def test_block_metrics_count_the_whole_block_and_do_not_cut_drafts() -> None:
    target = "a = 1\n    return a"
    m = metrics.block_metrics(["a = 2", "a = 1\n    return a  \n"], target)
    assert m["la1"] == 0 and m["lak"] == 2
    assert m["emk"] == 1.0 and m["em1"] == 0.0 and m["esk"] == 1.0
    assert m["cs1"] == pytest.approx(4 / len(target)) and m["csk"] == 1.0
    assert m["multi"] == 1.0 and m["lines1"] == 1.0 and m["empty"] == 0.0
    line = metrics.block_metrics(["a = 1"], target)  # a right first line: its share only
    assert line["csk"] == pytest.approx(5 / len(target)) and line["emk"] == 0.0
    assert metrics.block_metrics([], target)["empty"] == 1.0


def test_paired_ratio_interval_of_two_means() -> None:
    r = metrics.paired_ratio_ci([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    assert r["mean"] == pytest.approx(2.0) and r["lo"] == pytest.approx(2.0)
    assert r["hi"] == pytest.approx(2.0) and r["n"] == 3
    spread = metrics.paired_ratio_ci([1.0, 0.0], [0.0, 1.0])  # a quarter of resamples: b = 0
    assert spread["mean"] == pytest.approx(1.0) and spread["hi"] == math.inf
    assert math.isnan(metrics.paired_ratio_ci([1.0], [0.0])["mean"])


def test_block_comparisons_pair_the_blocks_and_give_the_ratio_of_characters_saved() -> None:
    from bench import replay_blocks

    target = "a = 1\n    return a"
    shown = {"single": ["a = 1"], "auto": ["a = 1\n    return a", "a = 2"]}
    rows = [
        {"config": config, "task": task, "repo": "o/r", "cursor": "block-start", "lines": 2,
         "verbatim": n == 0, "twin": False, "target": target, "drafts": drafts, "ms": 10.0,
         **metrics.block_metrics(drafts, target)}
        for config, drafts in shown.items()
        for n, task in enumerate(("o/r#b0", "o/r#b1"))
    ]  # fmt: skip
    comparisons = replay_blocks.compare(rows, list(shown))
    assert {(c["a"], c["b"]) for c in comparisons} == {("auto", "single")}  # later - earlier

    def one(kind: str, metric: str, subset: str) -> dict[str, Any]:
        return next(
            c for c in comparisons
            if (c["kind"], c["metric"], c["subset"]) == (kind, metric, subset)
        )  # fmt: skip

    # auto saves all 18 characters, single the first line's 5: 3.6x in every resample
    ratio = one("ratio", "csk", "all")
    assert ratio["mean"] == pytest.approx(3.6) and ratio["lo"] == pytest.approx(3.6)
    assert one("difference", "lak", "all")["mean"] == pytest.approx(1.0)
    assert [one("difference", "lak", s)["n"] for s in ("verbatim", "new")] == [1, 1]


ZEN5_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni
bugs\t\t:

processor\t: 1
cpu family\t: 99
model name\t: Another
"""


def test_a_stamp_names_the_cpu_its_numbers_came_from() -> None:
    """Hosts of one model name differ by generation (a prefill ran twice as fast on one of
    family 26 as on the earlier ones), so a result says which it ran on, and what picks the
    kernels."""
    from bench.measure import cpu_description

    assert cpu_description(ZEN5_CPUINFO) == (
        "AMD EPYC (family 26, model 2; avx2 avx512f avx512_bf16 avx512_vnni)"
    )
    avx2_only = ZEN5_CPUINFO.replace(" avx512f avx512_bf16 avx512_vnni", "")
    assert cpu_description(avx2_only).endswith("model 2; avx2)")
    assert "none of avx2/" in cpu_description("model name\t: Old\nflags\t: sse2\n")
