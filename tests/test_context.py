"""The context assembler (issue 22 part 3): the codebase in the prompt, before the window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from lsp_server.context import ContextAssembler, Piece, assemble, used_names
from lsp_server.cursor import CursorContext
from lsp_server.prompt_plan import PromptPlan
from lsp_server.settings import DecodingSettings, parse_settings
from ngram_db.symbols import Symbol, extract

LIB = {
    "/ws/pkg/widgets.py": (
        "def frobnicate_widget(widget, *, force=False, retries=3) -> bool:\n    return True\n\n"
        "class Gizmo:\n    size: int = 3\n    def spin(self, times=1):\n        pass\n"
    ),
    "/ws/pkg/util.py": "def helper(x, y=2):\n    return x\n",
}
DOCUMENT = (
    "from pkg.widgets import frobnicate_widget, Gizmo\n"
    "from pkg.util import helper\n"
    "\n"
    "def local(a):\n"
    "    return a\n"
    "\n"
    "def main():\n"
    "    g = Gizmo()\n"
    "    local(1)\n"
    "    frobnicate_widget(g, force=True)\n"
    "    helper(3)\n"
    "    "
)
HERE = "/ws/app/main.py"


def lookup(names: Sequence[str]) -> list[Symbol]:
    rows = [s for path, text in LIB.items() for s in extract(path, text, "python")]
    return [s for s in rows if s.name in names]


def chars(text: str) -> int:
    return len(text)  # a token per character: exact, and the pieces' counts add up


def test_off_gives_nothing() -> None:
    assembler = ContextAssembler()
    args = ("u", HERE, DOCUMENT, len(DOCUMENT), ["u"], lookup, chars)
    assert assembler.preamble("off", 10_000, *args) == ""
    assert assembler.preamble("definitions", 10_000, *args) != ""


def test_the_headers_of_the_names_used_from_other_files_in_order_of_first_use() -> None:
    text = ContextAssembler().preamble(
        "definitions", 10_000, "u", HERE, DOCUMENT, len(DOCUMENT), ["u"], lookup, chars
    )
    assert text.startswith("# file: pkg/widgets.py\n")
    assert "def frobnicate_widget(widget, *, force=False, retries=3) -> bool" in text
    assert "def helper(x, y=2)" in text and "class Gizmo" in text
    assert "def local" not in text  # the document's own definitions are the window's
    order = [text.index(s) for s in ("frobnicate_widget", "class Gizmo", "def helper")]
    assert order == sorted(order)  # as the document first uses them (its imports)


def test_the_budget_keeps_the_headers_used_nearest_the_cursor() -> None:
    full = ContextAssembler().preamble(
        "definitions", 10_000, "u", HERE, DOCUMENT, len(DOCUMENT), ["u"], lookup, chars
    )
    helper = "# file: pkg/util.py\ndef helper(x, y=2)\n\n"
    assert helper in full
    small = ContextAssembler().preamble(
        "definitions", len(helper) + 5, "u", HERE, DOCUMENT, len(DOCUMENT), ["u"], lookup, chars
    )
    assert small == helper  # helper( is on the line above the cursor
    assert len(small) <= len(helper) + 5


def test_assemble_respects_the_budget_headers_first_then_chunks() -> None:
    headers = [Piece("header", "a.py", "def a()", 1), Piece("header", "b.py", "def b()", 0)]
    chunks = [Piece("chunk", "c.py", "x = 1\ny = 2")]
    everything = assemble(headers, chunks, 10_000, chars)
    # the headers laid out by first use (b before a), then the chunk
    assert everything.index("def b()") < everything.index("def a()") < everything.index("x = 1")
    for budget in range(0, len(everything) + 1, 7):
        assert chars(assemble(headers, chunks, budget, chars)) <= budget
    only_first = len(headers[0].render())
    assert assemble(headers, chunks, only_first, chars) == headers[0].render()


def test_the_preamble_is_stable_while_the_user_types() -> None:
    assembler = ContextAssembler()
    seen = set()
    for typed in ("", "g", "g.sp", "g.spin(", "g.spin(2)\n    "):
        document = DOCUMENT + typed
        seen.add(
            assembler.preamble(
                "definitions", 60, "u", HERE, document, len(document), ["u"], lookup, chars
            )
        )
    assert len(seen) == 1  # one prefix: the runner's KV cache keeps it


def test_recent_chunks_of_other_open_documents_come_after_the_headers() -> None:
    assembler = ContextAssembler()
    other = "def sibling():\n    value = compute_it()\n    "
    assembler.preamble(
        "definitions+recent", 10_000, "v", "/ws/app/other.py", other, len(other),
        ["u", "v"], lookup, chars,
    )  # fmt: skip
    args = ("u", HERE, DOCUMENT, len(DOCUMENT))
    text = assembler.preamble("definitions+recent", 10_000, *args, ["u", "v"], lookup, chars)
    assert "# file: other.py\ndef sibling():\n    value = compute_it()" in text
    assert text.index("def helper") < text.index("def sibling")
    assert "def sibling" not in assembler.preamble(
        "definitions", 10_000, *args, ["u", "v"], lookup, chars
    )
    # a document closed since: its chunk goes
    assert "def sibling" not in assembler.preamble(
        "definitions+recent", 10_000, *args, ["u"], lookup, chars
    )


def test_used_names_are_calls_and_imports_in_order_of_first_use() -> None:
    names = list(dict.fromkeys(n for n, _ in used_names(DOCUMENT)))
    assert names[:3] == ["frobnicate_widget", "Gizmo", "helper"]
    assert "local" in names and "main" not in names  # main( is a definition's, not a call


def test_the_settings_parse_and_refuse_bad_values() -> None:
    settings, errors = parse_settings({"context": "definitions", "contextTokens": 512})
    assert not errors
    assert settings.decoding.context == "definitions" and settings.decoding.context_tokens == 512
    assert DecodingSettings().context == "off"
    _, errors = parse_settings({"context": "everything", "contextTokens": 3})
    assert len(errors) == 2 and "context" in errors[0] and "contextTokens" in errors[1]


def test_the_prompt_lays_the_preamble_before_the_window(tokenizer_engine: SimpleNamespace) -> None:
    engine = tokenizer_engine
    settings = DecodingSettings()
    before = "".join(f"value_{i} = compute(value_{i - 1}, {i})\n" for i in range(2000)) + "x = "
    bare = CursorContext(before, "")
    preamble = "# file: a.py\ndef compute(previous, step)\n\n"
    dressed = CursorContext(before, "", preamble=preamble)
    plain = PromptPlan.of(engine, bare, settings).window(300)  # type: ignore[arg-type]
    text = PromptPlan.of(engine, dressed, settings).window(300)  # type: ignore[arg-type]
    assert text == preamble + plain  # the window keeps its budget; the preamble comes on top
    extra = len(engine.tokenizer(preamble, add_special_tokens=False)["input_ids"])
    assert PromptPlan.of(engine, dressed, settings).budget(300) == 300 + extra  # type: ignore[arg-type]
    assert PromptPlan.of(engine, bare, settings).budget(300) == 300  # type: ignore[arg-type]
    huge = CursorContext(before, "", preamble=preamble * 400)  # over half the context: dropped
    assert PromptPlan.of(engine, huge, settings).window(300) == plain  # type: ignore[arg-type]


def test_the_session_lays_the_preamble_only_when_the_setting_is_on(
    tokenizer_engine: SimpleNamespace,
) -> None:
    """The server's hook (answer.with_preamble, before a decode and a warm-up)."""
    from pathlib import Path

    from lsp_server.answer import with_preamble
    from lsp_server.request import Request
    from lsp_server.session import Session
    from lsp_server.settings import Settings
    from lsp_server.stores import StoresHere
    from lsp_server.workspace import Where

    store: Any = SimpleNamespace(symbols_named=lookup)
    here = StoresHere(store, None)
    session = Session(tokenizer_engine, SimpleNamespace(), None)  # type: ignore[arg-type]
    uri = "file:///ws/app/main.py"
    where = Where(uri, Path(HERE), [Path("/ws")], {uri: DOCUMENT})
    context = CursorContext.at(DOCUMENT, len(DOCUMENT))
    request = Request(uri, where, context, Settings())
    off = with_preamble(session, request, here, ContextAssembler())
    assert off.preamble == ""
    settings = Settings(decoding=DecodingSettings(context="definitions", context_tokens=512))
    on = with_preamble(session, replace(request, settings=settings), here, ContextAssembler())
    assert (
        on.preamble.startswith("# file: pkg/widgets.py\n") and "def helper(x, y=2)" in on.preamble
    )
    assert on.before == context.before  # the window's text is unchanged
