"""bench/pipeline.py: the spec -> run -> save -> report shape, and the summaries the quality
scripts share, checked against the committed results they produced before the move."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import metrics, pipeline
from bench.measure import RESULTS, Stamp

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # means of all-nan metrics


def same(a: Any, b: Any) -> bool:
    """Equal as JSON (nan equals nan), which is how the results are compared when saved."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def saved(name: str) -> dict[str, Any]:
    path = RESULTS / name
    if not path.exists():
        pytest.skip(f"{name} is not committed")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_coherence_summaries_match_the_saved_run() -> None:
    from bench.coherence import METRICS

    data = saved("coherence.json")
    rows = data["items"]["rows"]
    methods = metrics.summarize(rows, METRICS)
    for name, m in methods.items():
        m["ppl_best_median"] = data["methods"][name]["ppl_best_median"]
    assert same(methods, data["methods"])
    assert same(metrics.compare_first(rows, "ppl_best"), data["comparisons"])


def test_quality_summaries_match_the_saved_run() -> None:
    from bench import quality

    data = saved("quality.json")
    rows = data["items"]["rows"]
    results: dict[str, Any] = {}
    tasks = [
        quality.LineTask(t["source"], t["line"], "", t["target"]) for t in data["items"]["tasks"]
    ]
    quality.methods_phase(results, rows, tasks)
    assert same(results["methods"], data["methods"])
    assert same(results["comparisons"], data["comparisons"])
    assert [s["name"] for s in data["specs"]][-9:] == [
        s.name for s in quality.ablation_specs(quality.Spec(**data["specs"][0]))
    ]


def test_compare_first_pairs_against_another_metric() -> None:
    rows = {
        "a": [{"passk": 1.0, "pass1": 0.0}, {"passk": 1.0, "pass1": 1.0}],
        "greedy": [{"passk": 1.0, "pass1": 0.0}, {"passk": 1.0, "pass1": 0.0}],
    }
    same_metric = metrics.compare_first(rows, "passk")
    against_pass1 = metrics.compare_first(rows, "passk", lambda b: "pass1")
    assert same_metric[0]["mean"] == 0.0
    assert against_pass1[0]["mean"] == 1.0
    assert against_pass1[0]["a"] == "a" and against_pass1[0]["b"] == "greedy"


def test_run_parses_measures_stamps_saves_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(pipeline, "RESULTS", tmp_path)
    monkeypatch.setattr(Stamp, "finish", lambda self, started: {"commit": self.commit})
    bench = pipeline.Benchmark(
        "toy", "a toy", {"quick": 2, "full": 5}, lambda p: p.add_argument("--extra", type=int)
    )
    seen: dict[str, Any] = {}

    def measure(args: Any) -> tuple[dict[str, Any], Stamp]:
        seen.update(size=pipeline.size_of(args), extra=args.extra)
        return {"n": 3}, Stamp(model="toy", commit="abc")

    pipeline.run(bench, measure, lambda r: [f"n={r['n']}"], ["--quick", "--extra", "7"])
    assert seen == {"size": "quick", "extra": 7}
    written = json.loads((tmp_path / "toy-quick.json").read_text())
    assert written == {"n": 3, "stamp": {"commit": "abc"}}
    assert capsys.readouterr().out.splitlines()[-1] == "n=3"
    pipeline.run(bench, measure, lambda r: [], ["--size", "full"])
    assert (tmp_path / "toy.json").exists() and seen["size"] == "full"
    assert not (tmp_path / "toy.md").exists()  # no markdown asked for


def test_run_writes_the_markdown_summary_beside_the_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "RESULTS", tmp_path)
    monkeypatch.setattr(Stamp, "finish", lambda self, started: {"commit": self.commit})
    bench = pipeline.Benchmark("toy", "a toy", markdown=lambda r: f"# n is {r['n']}\n")
    pipeline.run(bench, lambda args: ({"n": 4}, Stamp(model="toy", commit="abc")), lambda r: [], [])
    assert (tmp_path / "toy.md").read_text() == "# n is 4\n"


def test_the_markdown_summary_renders_the_results_as_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Int keys and tuples come back from JSON as strings and lists: the summary written
    beside a run must be the one its saved file renders (bench.ngram's collisions once
    differed)."""
    monkeypatch.setattr(pipeline, "RESULTS", tmp_path)
    monkeypatch.setattr(Stamp, "finish", lambda self, started: {"commit": self.commit})
    bench = pipeline.Benchmark("toy", "a toy", markdown=lambda r: f"{r['per']}\n")
    measured = {"per": {2: (0, 1)}}
    pipeline.run(bench, lambda args: (measured, Stamp(model="toy", commit="abc")), lambda r: [], [])
    assert (tmp_path / "toy.md").read_text() == "{'2': [0, 1]}\n"


def test_fidelity_markdown_renders_the_committed_summary_from_its_json() -> None:
    from bench import fidelity

    assert fidelity.BENCH.markdown is fidelity.markdown
    expected = (RESULTS / "fidelity.md").read_text()
    assert fidelity.markdown(saved("fidelity.json")) == expected


@pytest.mark.parametrize(
    ("argv", "count", "cursor"),
    [
        (
            ["--limit", "1", "--cursor", "mid-line", "--configs", "greedy,beam"],
            "targets",
            "mid-line",
        ),
        (
            ["--tasks", "blocks", "--limit", "1", "--configs", "single,multi"],
            "blocks",
            "block-start",
        ),
    ],
)
def test_both_replays_run_through_one_driver(
    argv: list[str],
    count: str,
    cursor: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The line and block replays share the run: positions from the frozen data, one row a
    configuration and position, the results saved after each configuration and at the end."""
    from bench import replay, replay_driver

    saves: list[bool] = []

    async def fake_run(
        configs: Any, todo: Any, *args: Any, done: Any, row_of: Any, **kw: Any
    ) -> Any:
        rows: list[dict[str, Any]] = []
        for config in configs:
            rows += [{"config": config.name, "ms": 5.0, **row_of(p, ["x"])} for p in todo]
            done(rows)
            saves.append(json.loads(out.read_text())["partial"])
        return rows, {"compiled_step": False, "model": args[1], "counters": {}}

    monkeypatch.setattr(replay_driver, "run_configs", fake_run)
    monkeypatch.setattr(replay_driver, "build_stores", lambda data, repos, model: {"repos": repos})
    monkeypatch.setattr(Stamp, "finish", lambda self, started: {"model": self.model})
    out = tmp_path / "r.json"
    assert replay.main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert saves == [True, True] and result["partial"] is False
    assert result["data"][count] == len(result["stores"]["repos"]) == result["data"]["positions"]
    assert result["data"]["cursors"] == [cursor]
    assert list(result["configs"]) == argv[-1].split(",")
    assert len(result["rows"]) == 2 * result["data"]["positions"]
    assert {(c["a"], c["b"]) for c in result["comparisons"]} >= {tuple(argv[-1].split(","))[::-1]}
    assert len(capsys.readouterr().out.strip().splitlines()) >= 2


def test_the_replays_results_go_where_the_reports_read_them(tmp_path: Path) -> None:
    """bench.replay's paths through its Benchmark: the quick run (make bench-quick) beside the
    full one, the validation split apart, ``--out`` over both; the block replay likewise."""
    from bench import replay, replay_blocks, replay_driver

    def path(tasks: Any, *argv: str) -> Path:
        bench = replay_driver.benchmark(tasks)
        return bench.output(bench.parser().parse_args(list(argv)))

    assert path(replay.LINES) == RESULTS / "replay.json"
    assert path(replay.LINES, "--quick") == RESULTS / "replay-quick.json"
    assert path(replay.LINES, "--split", "validation") == RESULTS / "replay-validation.json"
    assert path(replay.LINES, "--quick", "--out", str(tmp_path / "q.json")) == tmp_path / "q.json"
    assert path(replay_blocks.BLOCKS, "--split", "validation").name == (
        "replay_blocks-validation.json"
    )


def test_the_next_edits_results_go_where_the_report_reads_them(tmp_path: Path) -> None:
    """bench.next_edits on its Benchmark: the quick and validation runs apart from the test
    run that docs/benchmarks.md reads, ``--out`` over all."""
    from bench import next_edits

    def path(*argv: str) -> Path:
        return next_edits.BENCH.output(next_edits.BENCH.parser().parse_args(list(argv)))

    assert path() == RESULTS / "next_edits.json"
    assert path("--split", "validation") == RESULTS / "next_edits-validation.json"
    assert path("--split", "test2") == RESULTS / "next_edits-test2.json"
    assert path("--quick", "--split", "validation") == RESULTS / "next_edits-quick-validation.json"
    assert path("--quick", "--out", str(tmp_path / "n.json")) == tmp_path / "n.json"


def test_out_overrides_the_results_path_where_a_script_has_it(tmp_path: Path) -> None:
    bench = pipeline.Benchmark("x", "d", options=lambda p: p.add_argument("--out"))
    parser = bench.parser()
    assert bench.output(parser.parse_args([])) == RESULTS / "x.json"
    chosen = bench.output(parser.parse_args(["--out", str(tmp_path / "x.json")]))
    assert chosen == tmp_path / "x.json"


def test_latency_prompts_are_the_engine_code_at_full_length() -> None:
    """The prompts read superposed/*.py: they read lsp_server/engine/*.py after the engine had
    moved, so every setting timed an empty prompt."""
    from bench import latency
    from tests.runner_harness import tiny_tokenizer

    tokenizer = tiny_tokenizer()
    text = latency.code_context(tokenizer, 300)
    assert len(tokenizer.encode(text, add_special_tokens=False)) >= 290  # decode re-splits
    assert text.startswith('"""Decoding engine')  # superposed/__init__.py
    with pytest.raises(ValueError, match="fewer than"):
        latency.code_context(tokenizer, 10**8)


def test_latency_cli_takes_runners_repetitions_and_where_to_write() -> None:
    from bench import latency

    args = latency.parser().parse_args(["--runners", "fast-int4", "--runs", "1"])
    assert args.runners == ["fast-int4"] and args.runs == 1 and args.threads == [1, 2]
    assert latency.parser().parse_args([]).out == latency.RESULTS / "latency"


@pytest.mark.parametrize(
    ("module", "name"),
    [("replay", "replay"), ("replay", "replay_lines_auto"), ("replay_blocks", "replay_blocks")],
)
def test_replay_summaries_come_back_from_the_saved_rows(module: str, name: str) -> None:
    """The line and block replays summarise through one function (the block one leaves out a
    cursor it did not run, and has no latency rather than nan where no row has one)."""
    import importlib

    data = saved(f"{name}.json")
    summary = importlib.import_module(f"bench.{module}").summarize(data["rows"])
    assert same(summary, data["summary"])


@pytest.mark.parametrize(
    ("module", "render", "name"),
    [
        ("latency", "markdown", "latency"),
        ("latency", "markdown", "latency-cuda"),
        ("cpu_anchor", "report", "cpu_anchor"),
    ],
)
def test_scripts_on_their_own_layout_render_the_committed_summary(
    module: str, render: str, name: str
) -> None:
    """bench.latency saves a stamp per thread count and bench.cpu_anchor its markdown after the
    pipeline: their committed summaries still come back from their committed JSON. (The
    server's runs, bench/results/lsp_latency*.md, are records of the cases as they were when
    they ran: tests/test_lsp_latency_cases.py holds today's report.)"""
    import importlib

    data = saved(f"{name}.json")
    rendered = getattr(importlib.import_module(f"bench.{module}"), render)(data)
    assert rendered == (RESULTS / f"{name}.md").read_text()


def test_ngram_markdown_renders_the_committed_summary() -> None:
    from bench import ngram

    assert ngram.BENCH.markdown is ngram.markdown
    assert ngram.markdown(saved("ngram.json")) == (RESULTS / "ngram.md").read_text()


@pytest.mark.parametrize("quick", [False, True])
def test_the_committed_reports_are_the_saved_results(quick: bool) -> None:
    """docs/benchmarks.md and benchmarks-quick.md are exactly what ``python -m bench.report``
    makes of bench/results: no number in them is typed by hand, and none is stale."""
    from bench import report

    assert report.document(quick, plots=False) == report.path(quick).read_text()
