"""What the hidden-state memory (kNN-LM, index-repo --knn) costs, and a first look at its gain.

On the replay's validation split (bench/replay.py: Textualize/rich), with the model as the
server runs it (Engine.load's defaults, one thread, eager steps):

- index: index_knn over the snapshot files of the first ``--limit`` validation targets
  (not the whole snapshot: the CPU is slow), seconds and store MB per 100k tokens; the
  store it writes is the one the replay's server reads (beside the replay's codebase store);
- keep rule: all positions against kNM-LM's "only where the model's top-1 was wrong";
- tuning proxy: the target lines teacher-forced (the post-commit document before the line
  as context): the share of the line's tokens whose top-1 is right, model alone and mixed
  at each knnWeight x knnTemperature, with both keep rules. The replay decides the default;
  this only picks what the replay compares;
- lookup ms per step (numpy below FAISS_MIN positions, faiss above; a 100k store too);
- request latency (Engine.complete, no n-gram store) with and without the memory.

    flock /tmp/bench.lock python -m bench.knn_cost            # bench/results/knn_cost.json
    python -m bench.knn_cost --render                         # bench/results/knn_cost.md
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.measure import RESULTS, ROOT, Stamp, write_json
from bench.metrics import paired_diff_ci

DATA = ROOT / "bench" / "data" / "replay.json.gz"
OUT = RESULTS / "knn_cost.json"
REPLAY = RESULTS / "replay_knn_validation.json"  # the replay's verdict, rendered beside
WEIGHTS = (0.1, 0.2, 0.3, 0.5)
TEMPERATURES = (0.05, 0.2, 1.0)
NEIGHBOURS = 16
CONTEXT_TOKENS = 448  # of the document before a target line
PROMPT_CHARS = 1500  # of the document before a timed request's cursor


def targets(data: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    repo = data["split"]["validation"][0]
    return [t for t in data["tasks"] if t["repo"] == repo][:limit]


def line_states(engine: Any, document: str, line: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Teacher-forced: hidden states [n, H], model log-probs [n, V] and the tokens [n] of the
    target line (and its newline) after up to CONTEXT_TOKENS of the document before it."""
    import torch

    from superposed.knn import tapped

    rows = document.split("\n")
    before = "\n".join(rows[:line]) + ("\n" if line else "")
    tok = engine.tokenizer
    head = tok(before, add_special_tokens=False)["input_ids"][-CONTEXT_TOKENS:]
    whole = tok(before + rows[line] + "\n", add_special_tokens=False)["input_ids"]
    cut = len(tok(before, add_special_tokens=False)["input_ids"])
    target = whole[cut:][:64]
    ids = head + target
    runner = engine.runner
    runner.rewind(0)
    with tapped(runner) as tap:
        assert tap is not None
        logits = runner.score(torch.tensor([ids]))[0]  # [T, V]
        states = tap.rows()
    runner.rewind(0)
    assert states is not None
    n = len(target)
    at = slice(len(head) - 1, len(ids) - 1)  # the positions that predict the target tokens
    logp = torch.log_softmax(logits[at].double(), -1).numpy()
    return states[at][:n], logp[:n], np.asarray(target)


def proxy(items: list[tuple[np.ndarray, np.ndarray, np.ndarray]], index: Any) -> dict[str, Any]:
    """Top-1 accuracy and mean log-prob of the target tokens per (weight, temperature)."""
    from superposed.knn import knn_probs

    found = [[index.neighbours(h, NEIGHBOURS) for h in states] for states, _, _ in items]
    out: dict[str, Any] = {}
    for w in (0.0, *WEIGHTS):
        for temp in TEMPERATURES if w else (1.0,):
            right: list[float] = []
            logprob: list[float] = []
            for (_states, logp, tokens), near in zip(items, found, strict=True):
                for i, t in enumerate(tokens):
                    p = np.exp(logp[i])
                    if w:
                        p = (1 - w) * p + w * knn_probs(near[i], temp, len(p)).numpy()
                    right.append(float(int(np.argmax(p)) == int(t)))
                    logprob.append(float(np.log(max(p[t], 1e-300))))
            out[f"w={w} T={temp}"] = {
                "weight": w, "temperature": temp, "top1": float(np.mean(right)),
                "logprob": float(np.mean(logprob)), "_right": right,
            }  # fmt: skip
    base = out["w=0.0 T=1.0"]["_right"]
    for row in out.values():
        row["top1_vs_model"] = paired_diff_ci(row["_right"], base)
    for row in out.values():
        del row["_right"]
    return out


def lookup_ms(index: Any, queries: np.ndarray, rounds: int = 200) -> float:
    start = time.perf_counter()
    for i in range(rounds):
        index.neighbours(queries[i % len(queries)], NEIGHBOURS)
    return (time.perf_counter() - start) / rounds * 1e3


def synthetic_index(like: Any, n: int) -> Any:
    """A store of n random keys with ``like``'s projection: lookup time at that size."""
    from ngram_db.knn_store import KnnIndex

    rng = np.random.default_rng(0)
    keys = rng.normal(size=(n, like.store.projection.dims)).astype(np.float32)
    big = like.store.without([p for p, _ in like.store.files]).with_file(
        "/synthetic", "-", keys, rng.integers(0, 1000, n), np.zeros(n, bool)
    )
    return KnnIndex(big)


def latency(engine: Any, tasks: list[dict[str, Any]], documents: dict[str, str], w: float,
            temp: float, index: Any) -> dict[str, Any]:  # fmt: skip
    """Engine.complete at each target's line start, without and with the memory, interleaved,
    on a warm cache (the prompt prefilled once before): what the memory adds to the steps."""
    from superposed.types import DecodeConfig

    ms: dict[str, list[float]] = {"off": [], "on": []}
    for task in tasks:
        rows = documents[task["document"]].split("\n")
        line = task["line"]
        before = "\n".join(rows[:line]) + "\n" + rows[line][: task["cursors"]["line-start"]]
        prompt = engine.prompt(before[-PROMPT_CHARS:], 24)
        engine.runner.rewind(0)
        engine.complete(prompt, cfg=DecodeConfig())  # the prompt's prefill, not timed
        for name, cfg in (
            ("off", DecodeConfig()),
            ("on", DecodeConfig(knn_weight=w, knn_temperature=temp)),
        ):
            start = time.perf_counter()
            engine.complete(prompt, cfg=cfg, knn=index if name == "on" else None)
            ms[name].append((time.perf_counter() - start) * 1e3)
    p50 = {k: statistics.median(v) for k, v in ms.items()}
    return {"p50_ms": p50, "ratio": p50["on"] / p50["off"], "requests": len(tasks)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench.replay_driver import build_stores
    from ngram_db.knn_index import index_knn
    from ngram_db.knn_store import KnnIndex, KnnStore, knn_path
    from ngram_db.store import NgramStore
    from superposed.api import Engine
    from superposed.tokenizer import load_tokenizer

    began = time.perf_counter()
    stamp = Stamp(args.model)
    with gzip.open(DATA) as f:
        data = json.load(f)
    repo = data["split"]["validation"][0]
    stores = build_stores(data, [repo], args.model)
    meta = stores["repos"][repo]
    tasks = targets(data, args.limit)
    root = Path(meta["root"])
    snapshot = data["repos"][repo]["files"]
    paths = sorted({str(root / t["path"]) for t in tasks if t["path"] in snapshot})
    engine = Engine.load(args.model, threads=1, compile="off")
    stamp.runner = type(engine.runner).__name__ + " " + str(getattr(engine.runner, "precision", ""))
    with NgramStore.open(Path(meta["db"]), load_tokenizer(args.model)) as store:
        summary = index_knn(store, engine.runner, engine.name, "all", args.dims, rebuild=True,
                            only=paths)  # fmt: skip
        source_tokens = sum(len(f.ids) for f in store.file_records(paths))
    every = KnnStore.load(knn_path(meta["db"]))
    wrong = every.only_wrong()
    wrong_path = RESULTS / "tmp" / "knn-wrong.npz"
    wrong_path.parent.mkdir(exist_ok=True)
    wrong.save(wrong_path)
    per_100k = 1e5 / source_tokens
    index_part = {
        "files": len(paths), "source_tokens": source_tokens, "tokens_read": summary.tokens,
        "seconds": round(summary.seconds, 1),
        "seconds_per_100k_tokens": round(summary.seconds * per_100k, 1),
        "dims": every.projection.dims, "neighbours": NEIGHBOURS,
        "all": {"positions": len(every),
                "mb_per_100k_tokens": round(summary.bytes / 1e6 * per_100k, 2)},
        "wrong": {"positions": len(wrong), "share": round(len(wrong) / len(every), 3),
                  "mb_per_100k_tokens": round(wrong_path.stat().st_size / 1e6 * per_100k, 2)},
    }  # fmt: skip
    wrong_path.unlink()
    # Targets' lines teacher-forced, after their post-commit documents' earlier lines.
    items = [line_states(engine, data["documents"][t["document"]], t["line"]) for t in tasks]
    indexes = {"all": KnnIndex(every), "wrong": KnnIndex(wrong)}
    tuning = {name: proxy(items, index) for name, index in indexes.items()}
    best = max(
        (row for row in tuning["all"].values() if row["weight"] > 0), key=lambda r: r["top1"]
    )
    queries = np.concatenate([s for s, _, _ in items])
    lookups = {
        "store_ms": round(lookup_ms(indexes["all"], queries), 3),
        "store_positions": len(every),
        "faiss_100k_ms": round(lookup_ms(synthetic_index(indexes["all"], 100_000), queries), 3),
    }
    timed = latency(engine, tasks[: args.latency], data["documents"], best["weight"],
                    best["temperature"], indexes["all"])  # fmt: skip
    return {
        "stamp": stamp.finish(began), "repo": repo, "targets": len(tasks),
        "target_tokens": int(sum(len(t) for _, _, t in items)),
        "index": index_part, "tuning": tuning,
        "best": {"weight": best["weight"], "temperature": best["temperature"]},
        "lookup": lookups, "latency": timed,
    }  # fmt: skip


# ----- the report ----------------------------------------------------------------------------


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def ci(d: dict[str, float]) -> str:
    return f"{100 * d['mean']:+.1f} [{100 * d['lo']:+.1f}, {100 * d['hi']:+.1f}]"


def render(result: dict[str, Any], replay: dict[str, Any] | None) -> str:
    ix, lk, lat = result["index"], result["lookup"], result["latency"]
    out = [
        "# The hidden-state memory (kNN-LM): costs and gain",
        "",
        f"`python -m bench.knn_cost` on {result['stamp']['machine']}, {result['stamp']['date']} "
        f"(commit {result['stamp']['commit']}, {result['stamp']['runner']}, "
        f"{result['stamp']['torch_threads']} thread); the replay's validation split "
        f"({result['repo']}), the snapshot files of its first {result['targets']} targets.",
        "",
        "| cost | value |",
        "|---|---|",
        f"| index time (one forward over the files) | {ix['seconds_per_100k_tokens']:.0f} s per "
        f"100k tokens ({ix['source_tokens']:,} tokens of {ix['files']} files in "
        f"{ix['seconds']:.0f} s) |",
        f"| store, every position ({ix['dims']} dims, fp16) | "
        f"{ix['all']['mb_per_100k_tokens']:.1f} MB per 100k tokens "
        f"({ix['all']['positions']:,} positions) |",
        f"| store, kNM-LM's wrong-only rule | {ix['wrong']['mb_per_100k_tokens']:.1f} MB per 100k "
        f"tokens ({pct(ix['wrong']['share'])}% of the positions) |",
        f"| lookup per step, this store (k={ix['neighbours']}) | {lk['store_ms']:.2f} ms |",
        f"| lookup per step, 100k positions (faiss flat) | {lk['faiss_100k_ms']:.2f} ms |",
        f"| request p50 without / with (Engine.complete, warm cache, eager, "
        f"{lat['requests']} requests) | "
        f"{lat['p50_ms']['off']:.0f} / {lat['p50_ms']['on']:.0f} ms ({lat['ratio']:.2f}x) |",
        "",
        f"Tuning proxy: the {result['target_tokens']} tokens of the target lines, teacher-forced; "
        "top-1 right, % (paired interval against the model alone, points):",
        "",
        "| knnWeight | knnTemperature | all positions | wrong-only |",
        "|---|---|---|---|",
    ]
    for key, row in result["tuning"]["all"].items():
        other = result["tuning"]["wrong"][key]
        out.append(
            f"| {row['weight']} | {row['temperature'] if row['weight'] else '-'} | "
            f"{pct(row['top1'])} ({ci(row['top1_vs_model'])}) | "
            f"{pct(other['top1'])} ({ci(other['top1_vs_model'])}) |"
        )
    if replay is not None:
        out += ["", replay_table(replay)]
    return "\n".join(out) + "\n"


def replay_table(replay: dict[str, Any]) -> str:
    """The replay's cells and paired comparisons (a - b) of the memory against the default."""
    rows = [
        f"The replay (`bench/results/{REPLAY.name}`: `{replay['stamp']['command']}`, "
        f"commit {replay['stamp']['commit']}), all positions; EM and ES in %:",
        "",
        "| configuration | cursor | n | EM@1 | EM@k | ES@k | p50 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for config, cursors in replay["summary"].items():
        for cursor, subsets in cursors.items():
            c = subsets["all"]
            if not c["n"]:
                continue
            rows.append(
                f"| {config} | {cursor} | {c['n']} | {pct(c['em1']['mean'])} | "
                f"{pct(c['emk']['mean'])} | {pct(c['esk']['mean'])} | {c['p50_ms']:.0f} |"
            )
    rows += ["", "| a - b | cursor | metric | points [95% interval] |", "|---|---|---|---|"]
    shown = [d for d in replay["comparisons"] if d["metric_a"] in ("em1", "emk", "esk") and d["n"]]
    for d in shown:
        rows.append(f"| {d['a']} - {d['b']} | {d['cursor']} | {d['metric_a']} | {ci(d)} |")
    # The memory's side of each difference: (knn - default) = -(default - knn).
    gains = [
        d for d in shown if (d["a"] == "knn" and d["lo"] > 0) or (d["b"] == "knn" and d["hi"] < 0)
    ]
    verdict = (
        "a gain with its interval above 0: knnWeight could be on"
        if gains
        else "no gain with its interval above 0: knnWeight stays 0 (off) by default"
    )
    rows += ["", f"Verdict (issue 38 item 4): {verdict}."]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--limit", type=int, default=20, help="validation targets")
    parser.add_argument("--latency", type=int, default=10, help="requests timed, each way")
    parser.add_argument("--dims", type=int, default=64)
    parser.add_argument("--render", action="store_true", help="only write the markdown")
    args = parser.parse_args(argv)
    if not args.render:
        write_json(OUT, run(args))
    result = json.loads(OUT.read_text())
    replay = json.loads(REPLAY.read_text()) if REPLAY.exists() else None
    (RESULTS / "knn_cost.md").write_text(render(result, replay))
    print(f"wrote {(RESULTS / 'knn_cost.md').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
