"""Next edits on real edit history (issue 35 item 7): the user's first change, the server's next.

The tasks are frozen in bench/data/next_edits.json.gz (its builder is in history:
bench/results/README.md): commits of the replay's repositories, each with the pre-commit texts
of the files it opens (a path's later versions stored as line deltas of its earlier ones) and
the sites the commit changed (a span of a pre-commit line and its replacement). A
**repetitive** task's group is the sites where the commit made one rewrite; an **ordinary**
task's is one site whose rewrite the commit made once. Validation (rich) for tuning, test
(flask, black) and test2 (click, httpx: bench/data/next_edits_test2.json.gz, issue 55 item 3)
for the report.

Per task, as an editor would, over stdio with the real language server (``lsp_server.cli``;
next edits need no model: the tiny one, ``SUPERPOSED_TEST_TINY_MODEL=1``): didOpen of the
task's files (new URIs per task), the group's first site made as a user types it (the old
text deleted, the new one typed ``CHUNK`` characters at a time), then the proposals: the
``superposed/nextEditsReady`` notification for the document's version when it comes (within
``WAIT_S``) and the ``superposed/nextEdits`` request at the cursor (the list scored). Then
the user walks on: among the first 3 proposals, the first that is right is accepted (applied
as a didChange, then ``superposed.nextEditAccepted``), and the next proposals are awaited;
the walk stops when no proposal among the first 3 is right or every site of the group is made.

A proposal is **right** when applying it gives the document the commit gives with one or more
of its not yet made sites applied on the lines the proposal covers (exact text): a proposal the
commit made, whichever group it belongs to.

- recall@3: the share of the group's later sites reached by that walk; recall@1: the same,
  the walk stopping at the first list whose first proposal is not right (up to there the two
  walks are one);
- precision: right proposals over all distinct proposals shown during the walk (a proposal
  shown again after an accept counts once), pooled over tasks;
- false alarms (ordinary tasks): changes after which a proposal that is not right was shown,
  per 100 changes (and such proposals per 100 changes);
- latency: from the last didChange to the notification, less the pause that ends a change
  (``PAUSE_S``, ``NAME_PAUSE_S`` when it left the caret after a name's character; none after
  an accept, which ends its change at once): the time from the change's end to the
  proposals; and the request's round trip.

    python -m bench.next_edits                    # test split: bench/results/next_edits.json
    python -m bench.next_edits --split validation # bench/results/next_edits-validation.json
    python -m bench.next_edits --split test2      # bench/results/next_edits-test2.json
    python -m bench.next_edits --quick            # a few tasks of each kind per repository
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.measure import ROOT, Stamp, write_json
from bench.next_edits_score import (
    CHUNK,
    NAME_PAUSE_S,
    PAUSE_S,
    Site,
    Step,
    Walk,
    apply_sites,
    from_utf16,
    original_column,
    pause_s,
    proposal_key,
    right_sites,
    shifted,
    summarize,
    typing_changes,
    utf16,
    walk_row,
)
from bench.pipeline import Benchmark, run
from bench.replay_driver import resolve_commit

DATA = ROOT / "bench" / "data" / "next_edits.json.gz"
# The second test split (issue 55 item 3): click and httpx, built by the same builder (its
# tasks are that file's "test" split)
DATA_TEST2 = ROOT / "bench" / "data" / "next_edits_test2.json.gz"
SPLITS = {"validation": (DATA, "validation"), "test": (DATA, "test"), "test2": (DATA_TEST2, "test")}
WAIT_S = NAME_PAUSE_S + 1.0  # how long the user waits for the notification before asking
TYPE_GAP_S = 0.03  # between two typed chunks (a fast typist; under the pause)
TOP = 3  # proposals the user reads in a list
QUICK_PER_KIND = 4  # --quick: the first tasks of each kind per repository
OPTIONS = {"userStore": False, "nextEdits": True, "nextEditsScope": "open"}


# ----- tasks ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    id: str
    repo: str
    kind: str
    rewrite: str
    files: dict[str, str]  # path -> pre-commit text
    sites: tuple[Site, ...]  # every site of the commit in those files
    group: tuple[Site, ...]  # the rewrite's sites, the first made by the user


def load_data(path: Path = DATA) -> dict[str, Any]:
    data = json.loads(gzip.decompress(path.read_bytes()))
    assert isinstance(data, dict)
    return data


def apply_delta(base: str, ops: Sequence[Sequence[Any]]) -> str:
    """``base`` with a stored delta's line replacements ([[i1, i2, [lines...]], ...]) made."""
    a = base.split("\n")
    out: list[str] = []
    at = 0
    for i1, i2, lines in ops:
        out += a[at:i1] + list(lines)
        at = i2
    return "\n".join(out + a[at:])


def document_text(documents: Mapping[str, Any], doc: str) -> str:
    """A stored document's text: whole, or its delta applied to its base's text."""
    chain = []
    while "base" in documents[doc]:
        chain.append(documents[doc]["ops"])
        doc = documents[doc]["base"]
    text = str(documents[doc]["text"])
    for ops in reversed(chain):
        text = apply_delta(text, ops)
    return text


def tasks_of(data: Mapping[str, Any], split: str, per_kind: int | None = None) -> list[Task]:
    """The split's tasks (the first ``per_kind`` of each kind per repository)."""
    out: list[Task] = []
    taken: dict[tuple[str, str], int] = {}
    for t in data["tasks"]:
        if t["split"] != split:
            continue
        n = taken.get((t["repo"], t["kind"]), 0)
        if per_kind is not None and n >= per_kind:
            continue
        taken[(t["repo"], t["kind"])] = n + 1
        sites = tuple(Site(**s) for s in t["sites"])
        files = {p: document_text(data["documents"], d) for p, d in t["files"].items()}
        out.append(
            Task(t["id"], t["repo"], t["kind"], t["rewrite"], files, sites,
                 tuple(sites[i] for i in t["group"]))
        )  # fmt: skip
    return out


# ----- the server ---------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """pygls's namedtuples (unknown methods' params and results) as dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


class Editor:
    """One client session: opens, types, accepts, and hears the ready notifications."""

    def __init__(self, client: Any, workspace: Path) -> None:
        self.client = client
        self.workspace = workspace
        self.versions: dict[str, int] = {}
        self.ready: dict[tuple[str, int], tuple[float, list[dict[str, Any]]]] = {}
        self.heard = asyncio.Event()

        @client.feature("superposed/nextEditsReady")
        def on_ready(params: Any) -> None:
            p = plain(params)
            key = (p["textDocument"]["uri"], p["textDocument"]["version"])
            self.ready[key] = (time.perf_counter(), p["edits"])
            self.heard.set()

        @client.feature("superposed/status")
        def on_status(params: Any) -> None:  # the model's loading states: not measured here
            return None

    def open(self, path: Path, text: str) -> str:
        from lsprotocol import types
        from pygls.uris import from_fs_path

        uri = from_fs_path(str(path)) or ""
        self.versions[uri] = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=text
                )
            )
        )
        return uri

    def close(self, uri: str) -> None:
        from lsprotocol import types

        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    def change(self, uri: str, line: int, start: int, end: int, text: str) -> float:
        """One didChange of a range of ``line`` (UTF-16 columns): the time it was sent."""
        from lsprotocol import types

        self.versions[uri] += 1
        span = types.Range(types.Position(line, start), types.Position(line, end))
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                [types.TextDocumentContentChangePartial(range=span, text=text)],
            )
        )
        return time.perf_counter()

    def apply(self, edit: Mapping[str, Any]) -> float:
        """An accepted proposal applied as the editor applies it: one didChange."""
        from lsprotocol import types

        uri = edit["textDocument"]["uri"]
        self.versions[uri] += 1
        s, e = edit["range"]["start"], edit["range"]["end"]
        span = types.Range(
            types.Position(s["line"], s["character"]), types.Position(e["line"], e["character"])
        )
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                [types.TextDocumentContentChangePartial(range=span, text=edit["newText"])],
            )
        )
        return time.perf_counter()

    async def stats(self) -> dict[str, Any]:
        from lsprotocol import types

        answer = await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="superposed.stats", arguments=[])
        )
        return dict(plain(answer) or {})

    async def accepted(self, edit: Mapping[str, Any]) -> None:
        from lsprotocol import types

        await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="superposed.nextEditAccepted", arguments=[{"id": edit["id"]}]
            )
        )

    async def proposals(
        self, uri: str, line: int, character: int, sent: float
    ) -> tuple[float | None, float, list[dict[str, Any]]]:
        """Wait for the notification of the document's version (up to WAIT_S after ``sent``),
        then ask at the cursor: (ms to the notification or None, the request's ms, its edits)."""
        key = (uri, self.versions[uri])
        while key not in self.ready and time.perf_counter() < sent + WAIT_S:
            self.heard.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.heard.wait(), sent + WAIT_S - time.perf_counter())
        heard = self.ready.get(key)
        notified = (heard[0] - sent) * 1e3 if heard is not None else None
        params = {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}
        start = time.perf_counter()
        answer = await self.client.protocol.send_request_async("superposed/nextEdits", params)
        result = plain(answer)
        request_ms = (time.perf_counter() - start) * 1e3
        edits = list((result or {}).get("edits") or [])
        return notified, request_ms, edits


@contextlib.asynccontextmanager
async def session(
    workspace: Path,
    data_dir: Path,
    command: Sequence[str],
    options: Mapping[str, Any],
    sources: Path | None = None,
) -> AsyncIterator[Editor]:
    """A server over stdio (``command``, the tiny model) for ``workspace``, initialized with
    ``options``; ``sources``: its code from there (a commit's files), not from this checkout."""
    from bench.lsp_latency import server

    editors: list[Editor] = []  # made before initialize: its handlers hear every notification
    async with server(
        workspace,
        data_dir,
        options,
        sources,
        env={"SUPERPOSED_TEST_TINY_MODEL": "1"},
        on_start=lambda client: editors.append(Editor(client, workspace)),
        command=command,
    ):
        yield editors[0]


def judge(
    task: Task, made: set[Site], path: str | None, edit: Mapping[str, Any]
) -> frozenset[Site] | None:
    """The sites a proposal makes in the task's file ``path`` (None: not right)."""
    if path is None:  # a file the task did not open: the commit changed nothing there
        return None
    mine = [s for s in task.sites if s.path == path]
    return right_sites(task.files[path], frozenset(made & set(mine)), mine, edit)


def column_of(task: Task, made: set[Site], path: str | None, edit: Mapping[str, Any]) -> int:
    """Where a proposal starts in its line of the pre-commit file (the LSP column where the
    file is not the task's or the line is not there)."""
    start = edit["range"]["start"]
    rows = task.files[path].split("\n") if path is not None else []
    if not 0 <= start["line"] < len(rows) or path is None:
        return int(start["character"])
    mine = {s for s in made if s.path == path and s.line == start["line"]}
    row = apply_sites(task.files[path], mine).split("\n")[start["line"]]
    return original_column(row, start["character"], mine)


async def run_task(editor: Editor, task: Task, root: Path) -> Walk:
    """One task's walk: open, make the first site, then accept right proposals while any."""
    uris: dict[str, str] = {}
    for path, text in task.files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
        uris[path] = editor.open(root / path, text)
    by_uri = {u: p for p, u in uris.items()}
    made: set[Site] = set()
    first = task.group[0]
    row = apply_sites(task.files[first.path], made).split("\n")[first.line]
    start, end = shifted(first, made)
    sent = 0.0
    for a, b, text in typing_changes(row, start, end, first.new):
        if sent:
            await asyncio.sleep(TYPE_GAP_S)
        sent = editor.change(uris[first.path], first.line, a, b, text)
    made.add(first)
    after = apply_sites(task.files[first.path], made).split("\n")[first.line]
    pause = pause_s(after[: start + len(first.new)])
    cursor = (uris[first.path], first.line, utf16(after, start + len(first.new)))
    walk = Walk(task.id, task.kind, len(task.group) - 1)
    top1 = True
    for _ in range(len(task.group) + 2):
        notified, request_ms, edits = await editor.proposals(*cursor, sent)
        rights = [judge(task, made, by_uri.get(e["textDocument"]["uri"]), e) for e in edits]
        keys = [
            proposal_key(e, r, column_of(task, made, by_uri.get(e["textDocument"]["uri"]), e))
            for e, r in zip(edits, rights, strict=True)
        ]
        step = Step(edits, [r is not None for r in rights], keys, notified, request_ms)
        step.pause_s = pause
        walk.steps.append(step)
        later = [s for s in task.group if s not in made]
        pick = next((i for i, r in enumerate(rights[:TOP]) if r), None)
        if pick is None or not later or task.kind == "ordinary":
            break
        step.accepted = pick
        top1 = top1 and pick == 0
        chosen = edits[pick]
        sites = rights[pick]
        assert sites is not None
        sent = editor.apply(chosen)
        await editor.accepted(chosen)
        made |= sites
        gained = len([s for s in sites if s in task.group])
        walk.reached += gained
        walk.reached_top1 += gained if top1 else 0
        end_line = chosen["range"]["start"]["line"]
        path = by_uri[chosen["textDocument"]["uri"]]
        text_after = apply_sites(task.files[path], made & {s for s in task.sites if s.path == path})
        end_row = text_after.split("\n")[end_line]
        column = from_utf16(end_row, chosen["range"]["start"]["character"]) + len(chosen["newText"])
        cursor = (chosen["textDocument"]["uri"], end_line, utf16(end_row, column))
        pause = 0.0  # an accept ends its change at once (service.accepted, since a1186cb)
        if all(s in made for s in task.group):
            break
    for uri in uris.values():
        editor.close(uri)
    return walk


async def run_tasks(
    tasks: Sequence[Task],
    command: Sequence[str],
    options: Mapping[str, Any] = OPTIONS,
    server_commit: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every task's row, on one server for the whole run, and what the server counted
    (``superposed.stats``: why changes gave no pattern, accepts per kind). ``server_commit``:
    the server of that commit (``git archive``): others' unfinished edits stay out."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="next-edits-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        sources = None
        if server_commit is not None:
            from bench.lsp_latency import sources_at

            sources = sources_at(server_commit, Path(tmp) / "src")
        async with session(workspace, Path(tmp) / "data", command, options, sources) as editor:
            for n, task in enumerate(tasks):
                root = workspace / f"t{n}-{task.id.split('#')[-1]}"
                walk = await run_task(editor, task, root)
                rows.append({**walk_row(walk), "repo": task.repo, "rewrite": task.rewrite})
                if (n + 1) % 20 == 0:
                    print(f"{n + 1}/{len(tasks)} tasks", file=sys.stderr)
            stats = await editor.stats()
    counters = stats.get("counters") or {}
    return rows, {
        "counters": {k: v for k, v in counters.items() if k.startswith("next edits")},
        "next_edits": stats.get("nextEdits"),
    }


# ----- the command ---------------------------------------------------------------------------


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--split", choices=tuple(SPLITS), default="test")
    quick = f"the first {QUICK_PER_KIND} tasks of each kind and repository"
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--data", type=Path, help="the tasks (default: the split's file)")
    parser.add_argument("--out", type=Path, help="results JSON (default: bench/results/)")
    parser.add_argument("--server-commit", metavar="REF",
                        help="the server of this commit (default: the working tree)")  # fmt: skip
    parser.add_argument("--resummarize", type=Path, metavar="JSON",
                        help="recompute a saved run's summary from its rows")  # fmt: skip


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], Stamp]:
    """Every task of the split walked through one server, and what the server counted."""
    from bench.lsp_latency.client import SERVER  # pytest-lsp: imported when a run needs it

    stamp = Stamp(model="none (next edits read no model; the server runs the tiny one)")
    path, split = SPLITS[args.split]
    path = args.data or path
    data = load_data(path)
    tasks = tasks_of(data, split, QUICK_PER_KIND if args.quick else None)
    server_commit = resolve_commit(args.server_commit)
    rows, server = asyncio.run(run_tasks(tasks, SERVER, OPTIONS, server_commit))
    return {
        "data": {
            "file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else "",
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "split": args.split,
            "repos": {r: data["repos"][r]["head"] for r in data["split"][split]},
            "tasks": len(tasks),
        },
        "settings": OPTIONS,
        "server_commit": server_commit,
        "protocol": {"pause_s": PAUSE_S, "wait_s": WAIT_S, "chunk": CHUNK, "top": TOP},
        "server": server,
        "summary": summarize(rows),
        "rows": rows,
    }, stamp


def variant(args: argparse.Namespace) -> str:
    """bench/results/next_edits[-quick][-validation|-test2].json."""
    return ("-quick" if args.quick else "") + ("" if args.split == "test" else f"-{args.split}")


BENCH = Benchmark("next_edits", __doc__.splitlines()[0], options=options, variant=variant)


def main(argv: list[str] | None = None) -> int:
    args = BENCH.parser().parse_args(argv)
    if args.resummarize:
        saved = json.loads(args.resummarize.read_text())
        saved["summary"] = summarize(saved["rows"])
        write_json(args.resummarize, saved)
        return 0
    run(BENCH, measure, lambda result: [summary_line(result["summary"])], argv)
    return 0


def summary_line(s: Mapping[str, Any]) -> str:
    rep, o, lat = s["repetitive"], s["ordinary"], s["latency"]
    return (
        f"repetitive {rep['tasks']} tasks, {rep['later_sites']} later sites: recall@1 "
        f"{rep['recall1']['mean']:.3f} recall@3 {rep['recall3']['mean']:.3f}; precision "
        f"{s['precision']['mean']:.3f} of {s['proposed']}; false alarms "
        f"{o['false_alarms_per_100']['mean']:.1f}/100 changes ({o['changes']}); change end -> "
        f"proposals p50 {lat['change_end_p50_ms']:.0f} ms p95 {lat['change_end_p95_ms']:.0f} ms"
    )


if __name__ == "__main__":
    sys.exit(main())
