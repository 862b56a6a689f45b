"""Turn bench/results/*.json into docs/benchmarks.md and its plots: no number typed by hand.

python -m bench.report            # the full-size results where present, else the quick ones
python -m bench.report --quick    # the quick results only

The words live in bench/report_template.md; this module puts the sections in order and reads
the files they need. The first screen, what the defaults do today on each benchmark, comes
from bench/report_summary.py. The sections live by family: the replay's in
bench/report_replay.py, the quality benchmarks' (and the hypotheses) in bench/report_quality.py,
next edits' in bench/report_next_edits.py; the settled issues' sections are frozen in
bench/results/sections/.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, ROOT
from bench.report_quality import IMAGES, hypotheses, quality_sections
from bench.report_replay import replay_section
from bench.report_summary import summary_table
from bench.tables import generic, load, say, stamps_table

DOC = ROOT / "docs" / "benchmarks.md"
SECTIONS = RESULTS / "sections"


def embed(markdown: str) -> str:
    """Another script's markdown inside section 5: its headings two levels down."""
    return "\n".join(
        "##" + line if line.startswith("#") else line for line in markdown.splitlines()
    )


def other_results(name: str, script: str) -> list[str]:
    """bench/results/<name>.md (or its JSON, rendered plainly) from another benchmark script."""
    md, js = RESULTS / f"{name}.md", RESULTS / f"{name}.json"
    if md.exists():
        return [embed(md.read_text()), ""]
    if js.exists():
        return [f"### `bench/results/{name}.json`", "", generic(json.loads(js.read_text())), ""]
    return [say("missing_results", name=name, script=script), ""]


def speed_section(q: dict[str, Any] | None) -> str:
    out = ["## 5. Speed", ""]
    names = ("cpu_anchor", "cpu_anchor-qwen2.5-coder-0.5b-shapes", "llama_prompt_lookup",
             "own_model", "lsp_latency_cpu", "latency", "kernels", "kernel_choices", "fidelity",
             "lsp_latency", "knn_cost")  # fmt: skip
    for name in names:  # lsp_latency_cpu: issue 39's rerun of bench/lsp_latency
        out += other_results(name, name.removesuffix("_cpu").split("-")[0])
    if q is not None:
        name, main = next(iter(q["methods"].items()))
        st = q["store"]
        share = f"{100 * main['lookup_share']:.1f}"
        mib = f"{st['bytes'] / 2**20:.0f}"
        out += [say("lookup_share", name=name, share=share, tokens=f"{st['tokens']:,}", mib=mib)]
        out += [""]
        if st.get("tokens_per_second"):
            rate, seconds = f"{st['tokens_per_second']:,.0f}", f"{st['build_seconds']:.0f}"
            out += [say("store_build", rate=rate, seconds=seconds), ""]
    out += other_results("ngram", "ngram")
    return "\n".join(out)


def method_values() -> dict[str, Any]:
    """What the methods note says of nucleus sampling, read from the engine's defaults."""
    from superposed.types import DecodeConfig

    d = DecodeConfig()
    return {"top_p": d.top_p, "nucleus_temperature": d.nucleus_temperature, "seed": d.seed}


# The runs of the replay's frozen sections: distinct (issue 22), diversity (issue 22 part 1),
# blocks (issue 23: the block run, its line tasks, a later configuration merged in).
FROZEN_RUNS = ("replay_distinct", "replay_diversity", "replay_blocks", "replay_lines_auto",
               "replay_blocks_multi")  # fmt: skip
# bench/results/sections/, in the document's order
FROZEN = ("distinct", "diversity", "blocks", "models", "context", "shared", "wellformed",
          "branch", "confidence")  # fmt: skip
# ... and after issue 35's next edits, which still render from their results: issue 55 item
# 1's model score on each site (measured and retired; its code at c097828)
FROZEN_AFTER_NEXT_EDITS = ("next_edits_model",)


def load_runs(quick: bool) -> dict[str, dict[str, Any] | None]:
    """Every results file the report reads, in the order the stamps table lists them (None:
    not there; the quick report reads the quick runs only). The runs behind the replay's
    frozen sections (issues 22 and 23) are listed for their stamps."""
    frozen = {} if quick else {name: load(name, False) for name in FROZEN_RUNS}
    return {
        "replay": load("replay", quick),
        **frozen,
        **{name: load(name, quick) for name in ("quality", "humaneval", "coherence")},
    }


def own_sections(quick: bool) -> list[str]:
    """Sections that read results of their own (none in the quick report). The settled ones,
    issues whose decision is made, are frozen as their renderers last wrote them
    (bench/results/README.md): at commit 6faa04a 16 (which embedded model is the default),
    22 part 3 (the codebase in the prompt), 27 (shared indexes), 38 (malformed drafts and
    branching); at commit f3fa5fe 22 (distinct drafts, and first lines and words) and 23
    (whole blocks); at commit c097828 issue 55 item 1 (the model's word on each next-edit
    site), after issue 35's next edits, which still render from their results."""
    from bench.report_next_edits import next_edits_section

    if quick:
        return []
    frozen = [(SECTIONS / f"{name}.md").read_text() for name in FROZEN]
    after = [(SECTIONS / f"{name}.md").read_text() for name in FROZEN_AFTER_NEXT_EDITS]
    return [s for s in (*frozen, next_edits_section(), *after) if s is not None]


def document(quick: bool, plots: bool = True) -> str:
    """The report from the saved results (the quick ones with ``quick``); ``plots``: draw its
    images too."""
    runs = load_runs(quick)
    tag = "-quick" if quick else ""
    if plots:
        IMAGES.mkdir(parents=True, exist_ok=True)
    replay = runs["replay"]
    sections = [
        *([replay_section(replay)] if replay is not None else []),
        *own_sections(quick),
        *quality_sections(runs, tag, plots),
        speed_section(runs["quality"]),
    ]
    q, h, c = (runs[n] for n in ("quality", "humaneval", "coherence"))
    doc = say(
        "document",
        summary=summary_table(quick),
        hypotheses_date=q["stamp"]["date"][:10] if q is not None else "an early date",
        hypotheses=hypotheses(q, h, c),
        stamps=stamps_table([d for d in runs.values() if d is not None]),
        sections="\n\n".join(s.rstrip("\n") for s in sections),
        **method_values(),
    )
    return doc.rstrip() + "\n"


def path(quick: bool) -> Path:
    return DOC.with_name("benchmarks-quick.md" if quick else "benchmarks.md")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="report the quick results only")
    args = parser.parse_args(argv)
    out = path(args.quick)
    out.write_text(document(args.quick))
    print(f"report: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
