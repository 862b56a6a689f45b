"""Issue 27's section of docs/benchmarks.md: shared infini-gram indexes (``python -m
bench.replay`` runs with an index of other projects' sources; the corpus's build and the
commands: bench/results/README.md), the infini-gram scale table beside them
(bench/infini_scale.py's results), and the verdicts and the ``sharedWeight`` rule worked out
from the rows."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.measure import RESULTS
from bench.metrics import paired_configs
from bench.replay import SUBSETS
from bench.tables import load_file, points, say, table

RUN = RESULTS / "replay_shared.json"
CORPUS = RESULTS / "replay_shared_corpus.json"
SCALE = RESULTS / "infini_scale.json"
SNAPSHOTS = RESULTS / "replay_shared_snapshots.json"  # the first question, "snapshots" only
BUDGET = RESULTS / "replay_shared_budget.json"  # sharedBudgetMs: auto, shared, budget
LOOKUPS = RESULTS / "replay_shared_lookups.json"  # one lookup's cost, as a request asks it
WEIGHT = RESULTS / "replay_shared_weight.json"  # sharedWeight, on the validation split
BASELINE, SHARED, SNAPSHOTS_CONFIG, BUDGETED = "auto", "shared", "snapshots", "budget"
CURSOR = "line-start"


def compare(
    result: Mapping[str, Any], subset: str, config: str = SHARED, against: str = BASELINE
) -> dict[str, Any]:
    """``config`` against ``against`` on one subset of the line-start positions
    (bench.metrics' ``paired_configs``)."""
    keep = SUBSETS[subset]
    return paired_configs(
        result["rows"], config, against, lambda r: r["cursor"] == CURSOR and keep(r)
    )


def load(path: Path) -> dict[str, Any] | None:
    return load_file(path, complete=True)


def verdict(c: Mapping[str, Any]) -> str:
    """The answer on the new lines: a lift or a loss only where ES@3's interval excludes 0."""
    d = c["esk"]
    if d["lo"] > 0:
        return f"lifts edit similarity@3 on new lines by {100 * d['mean']:.1f} points"
    if d["hi"] < 0:
        return f"lowers edit similarity@3 on new lines by {-100 * d['mean']:.1f} points"
    return "does not measurably lift the drafts on new lines: the interval includes 0"


def scale_table(data: Mapping[str, Any]) -> str:
    from bench.infini_scale import report

    body = report(dict(data)).split("\n", 2)[2]  # without its own title
    return body.rstrip("\n")


def moved(c: Mapping[str, Any], m: str) -> list[str]:
    """One metric's cells: the mean before → with, and the paired difference."""
    return [f"{100 * c[f'{m}_base']:.1f} → {100 * c[f'{m}_config']:.1f}", points(c[m])]


def load_of(stamp: Mapping[str, Any]) -> str:
    """The 1-minute load average at the run's start → end."""
    return f"{stamp['load_start'][0]} → {stamp['load_end'][0]}"


def replay_part(result: Mapping[str, Any], corpus: Mapping[str, Any] | None) -> list[str]:
    cells = {s: compare(result, s) for s in ("all", "new")}
    rows = [
        [s, c["n"], *moved(c, "emk"), *moved(c, "esk"),
         f"{c['p50_base']:.0f} / {c['p50_config']:.0f} ms = {c['ratio']:.2f}x", c["differ"]]
        for s, c in cells.items()
    ]  # fmt: skip
    header = ["lines", "n", "EM@3 store → +shared", "EM@3 difference", "ES@3 store → +shared",
              "ES@3 difference", "p50 store / +shared", "drafts differ"]  # fmt: skip
    what = (
        f"{corpus['tokens'] / 1e6:.1f}M tokens, {corpus['files']} files of "
        f"{len(corpus['packages'])} installed projects ({', '.join(corpus['packages'].values())}"
        f"; left out as copies of replayed code: "
        f"{', '.join(f'{k}/{p}' for k, v in corpus['left_out'].items() for p in v) or 'none'}; "
        f"`{CORPUS.name}`)"
        if corpus is not None
        else "other projects' sources"
    )
    stamp = result["stamp"]
    return [
        say("shared_replay", repos=", ".join(result["data"]["splits"]["test"]), file=RUN.name,
            model=stamp["model"], commit=stamp["commit"], baseline=BASELINE, shared=SHARED,
            what=what, load=load_of(stamp), table=table(header, rows, "lrllllll"),
            verdict=verdict(cells["new"]), emk_new=points(cells["new"]["emk"]),
            esk_all=points(cells["all"]["esk"]), ratio=f"{cells['all']['ratio']:.2f}")
    ]  # fmt: skip


def same_within(c: Mapping[str, Any]) -> bool:
    """The first question's rule: the same quality when both intervals include 0."""
    return all(c[m]["lo"] <= 0 <= c[m]["hi"] for m in ("emk", "esk"))


def snapshots_part(run: Mapping[str, Any], snaps: Mapping[str, Any]) -> list[str]:
    """The test snapshots served from a shared index (no codebase store) against the store:
    ``snapshots`` ran alone (its own file), paired with ``auto``'s rows of the main run; the
    quality is deterministic, so the pairs hold, but latencies of two runs do not compare."""
    merged = {"rows": [*run["rows"], *snaps["rows"]]}
    cells = {s: compare(merged, s, SNAPSHOTS_CONFIG) for s in ("all", "new")}
    rows = [
        [s, c["n"], *moved(c, "emk"), *moved(c, "esk"),
         "same within intervals" if same_within(c) else "differs"]
        for s, c in cells.items()
    ]  # fmt: skip
    header = ["lines", "n", "EM@3 store → index", "EM@3 difference", "ES@3 store → index",
              "ES@3 difference", "quality"]  # fmt: skip
    return [
        "",
        say("shared_snapshots", config=SNAPSHOTS_CONFIG, file=SNAPSHOTS.name,
            commit=snaps["stamp"]["commit"], baseline=BASELINE,
            table=table(header, rows, "lrlllll")),
    ]  # fmt: skip


QUALITY_HEADER = ["pair", "lines", "n", "EM@3", "EM@3 difference", "ES@3", "ES@3 difference",
                  "drafts differ"]  # fmt: skip


def default_budget(commit: str) -> str | None:
    """``sharedBudgetMs``'s default in lsp_server/settings.py at ``commit`` (None: unknown)."""
    import re
    import subprocess

    shown = subprocess.run(
        ["git", "show", f"{commit.split('+')[0]}:lsp_server/settings.py"],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    found = re.search(r"shared_budget_ms: int = ([0-9_]+)", shown.stdout)
    return found.group(1) if found else None


def budget_part(run: Mapping[str, Any]) -> list[str]:
    """sharedBudgetMs: the store alone, the shared index unbudgeted, and with the default
    budget, in one run: latency side by side, quality paired."""
    options = {name: c["options"] for name, c in run["configs"].items()}
    budget = options[BUDGETED].get("sharedBudgetMs")
    if budget is None:  # the server's default at the run's commit
        default = default_budget(run.get("server_commit") or run["stamp"]["commit"])
        budget_text = f"the default, {default} ms" if default else "the default"
    else:
        budget_text = f"{budget} ms"
    cells = {
        (s, config, against): compare(run, s, config, against)
        for s in ("all", "new")
        for config, against in ((SHARED, BASELINE), (BUDGETED, BASELINE), (BUDGETED, SHARED))
    }
    latency = cells[("all", BUDGETED, BASELINE)]
    unbudgeted = cells[("all", SHARED, BASELINE)]
    speed = [
        [name, f"{p50:.0f}", f"{p95:.0f}", f"{p50 / latency['p50_base']:.2f}x"]
        for name, p50, p95 in (
            (f"`{BASELINE}` (store)", latency["p50_base"], latency["p95_base"]),
            (f"`{SHARED}` (+index, unbudgeted)", unbudgeted["p50_config"],
             unbudgeted["p95_config"]),
            (f"`{BUDGETED}` (+index, {budget_text})", latency["p50_config"],
             latency["p95_config"]),
        )
    ]  # fmt: skip
    quality = [
        [f"`{config}` vs `{against}`", s, c["n"], *moved(c, "emk"), *moved(c, "esk"), c["differ"]]
        for (s, config, against), c in cells.items()
    ]
    stamp = run["stamp"]
    cost = load(LOOKUPS)
    lookup = (
        say("shared_lookup", file=LOOKUPS.name, lookups=cost["lookups"], shards=cost["shards"],
            step_p50=f"{cost['step']['p50_ms']:.0f}", step_p95=f"{cost['step']['p95_ms']:.0f}",
            prompt_p50=f"{cost['prompt']['p50_ms']:.0f}", others=cost["prompt"]["others"])
        if cost is not None
        else ""
    )  # fmt: skip
    speed_table = table(["configuration", "p50 ms", "p95 ms", "p50 / store"], speed, "lrrr")
    return [
        "",
        say("shared_budget", file=BUDGET.name,
            commit=(run.get("server_commit") or stamp["commit"])[:7],
            positions=run["data"]["positions"],
            targets=run["data"]["targets"] // len(run["data"]["splits"]["test"]),
            unbudgeted=options[SHARED].get("sharedBudgetMs"), budget=budget_text,
            load=load_of(stamp), lookup=lookup, speed_table=speed_table,
            quality_table=table(QUALITY_HEADER, quality, "llrlllll")),
    ]  # fmt: skip


def weights(run: Mapping[str, Any]) -> dict[str, float]:
    """The run's configurations with a shared index, each with its ``sharedWeight``."""
    return {
        name: float(c["options"].get("sharedWeight", 1.0))
        for name, c in run["configs"].items()
        if c["options"].get("sharedIndexes")
    }


def pick_weight(run: Mapping[str, Any]) -> tuple[float, str]:
    """The rule: the weight with the best ES@3 over all line starts, if its paired ES@3
    difference against weight 1.0 excludes 0; else 1.0 (a tie keeps the default)."""
    named = weights(run)
    one = next(name for name, w in named.items() if w == 1.0)
    es = {name: compare(run, "all", name, BASELINE)["esk_config"] for name in named}
    best = max(named, key=lambda name: (es[name], named[name] == 1.0))
    if best == one:
        return 1.0, f"weight 1.0 has the best ES@3 ({100 * es[one]:.1f})"
    d = compare(run, "all", best, one)["esk"]
    if d["lo"] > 0:
        return named[best], (
            f"weight {named[best]:g} has the best ES@3 ({100 * es[best]:.1f}), "
            f"{points(d)} against 1.0"
        )
    return 1.0, (
        f"weight {named[best]:g} has the best ES@3 ({100 * es[best]:.1f}) but within the "
        f"interval of 1.0's ({points(d)}): a tie keeps 1.0"
    )


def weight_part(run: Mapping[str, Any]) -> list[str]:
    """sharedWeight on the validation split: the store alone and the index at each weight,
    in one run; quality paired against the store and against weight 1.0."""
    named = sorted(weights(run).items(), key=lambda kv: -kv[1])
    one = next(name for name, w in named if w == 1.0)
    rows = []
    for s in ("all", "new"):
        for name, w in named:
            c = compare(run, s, name, BASELINE)
            against_one = points(compare(run, s, name, one)["esk"]) if name != one else "—"
            rows.append(
                [f"`{name}` ({w})", s, c["n"], f"{100 * c['emk_config']:.1f}", points(c["emk"]),
                 f"{100 * c['esk_config']:.1f}", points(c["esk"]), against_one,
                 f"{c['p50_config']:.0f}", c["differ"]]
            )  # fmt: skip
        base = compare(run, s, one, BASELINE)
        rows.append([f"`{BASELINE}` (store only)", s, base["n"], f"{100 * base['emk_base']:.1f}",
                     "—", f"{100 * base['esk_base']:.1f}", "—", "—",
                     f"{base['p50_base']:.0f}", "—"])  # fmt: skip
    header = ["configuration (sharedWeight)", "lines", "n", "EM@3", "EM@3 vs store", "ES@3",
              "ES@3 vs store", "ES@3 vs 1.0", "p50 ms", "drafts differ from store"]  # fmt: skip
    chosen, why = pick_weight(run)
    stamp = run["stamp"]
    validation = run["data"]["splits"]["validation"]
    return [
        "",
        say("shared_weight", file=WEIGHT.name,
            commit=(run.get("server_commit") or stamp["commit"])[:7],
            repos=", ".join(validation), positions=run["data"]["positions"],
            targets=run["data"]["targets"] // len(validation), load=load_of(stamp),
            table=table(header, rows, "llrlllllrr"), why=why, chosen=chosen),
    ]  # fmt: skip


def shared_section() -> str | None:
    """The section, or None before any of its results exist."""
    scale, run = load(SCALE), load(RUN)
    if scale is None and run is None:
        return None
    parts = [say("shared"), ""]
    if scale is not None:
        parts += [say("shared_scale", table=scale_table(scale)), ""]
    if run is not None:
        parts += replay_part(run, load(CORPUS))
        snaps = load(SNAPSHOTS)
        if snaps is not None:
            parts += snapshots_part(run, snaps)
    budgeted = load(BUDGET)
    if budgeted is not None:
        parts += budget_part(budgeted)
    weighted = load(WEIGHT)
    if weighted is not None:
        parts += weight_part(weighted)
    return "\n".join(parts) + "\n"
