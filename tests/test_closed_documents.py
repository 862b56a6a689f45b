"""A closed document leaves nothing behind (issue 34 item 8d): opening and closing 2,000
documents four times grew the resident set 464 -> 531 -> 543 -> 554 -> 563 MB."""

from __future__ import annotations

import threading
from typing import Any

from lsprotocol import types
from pygls.workspace import Workspace

from lsp_server.completion.cleanup import Suggestion
from lsp_server.server import SuperposedServer, did_close, did_open
from lsp_server.session import Session
from lsp_server.stores.match_indexes import MatchIndexes
from lsp_server.workspace import Where

DOCUMENTS = 200
TEXT = "def handle_{n}(request):\n    return respond_to_{n}(request.body)\n"


class EngineStub:
    """No model: nothing here decodes; what the engine is asked to give back is counted."""

    def __init__(self) -> None:
        self.released = 0

    def release(self) -> None:
        self.released += 1


def _server(tokenizer: Any) -> tuple[SuperposedServer, Session]:
    """A server with a session whose memory is real (no model: nothing here decodes)."""
    server = SuperposedServer()
    server.protocol._workspace = Workspace(None)  # what initialize makes
    engine: Any = EngineStub()
    session = Session(engine=engine, stores=None, indexes=MatchIndexes(tokenizer))  # type: ignore[arg-type]
    server.slot.state = session
    server.settings.decoding.first_prompt_tokens = 0  # no warm-ups: there is no engine
    return server, session


def test_closed_documents_leave_nothing_in_the_server(tokenizer: Any) -> None:
    server, session = _server(tokenizer)
    memory = session.indexes
    for cycle in range(2):
        uris = [f"file:///w/c{cycle}/d{n}.py" for n in range(DOCUMENTS)]
        for n, uri in enumerate(uris):
            item = types.TextDocumentItem(uri, "python", 1, TEXT.format(n=n))
            server.workspace.put_text_document(item)
            did_open(server, types.DidOpenTextDocumentParams(item))
            if n % 20 == 0:  # a request now and then: the memory indexes what is open
                where = Where.of(uri, server.workspace)
                memory.source(uri, 10, where.documents, shared=lambda d: d)
                server.drafts.remember(uri, "def ", [Suggestion("handle", 1.0)])
                session.shareable.others(where.documents, (), 1 << 20)
        memory.wait()
        assert memory.held()["documents"] > DOCUMENTS // 2  # it did hold them
        for uri in uris:
            server.workspace.remove_text_document(uri)
            did_close(server, types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
        memory.wait()  # the others' index is rebuilt without them
        assert memory.held() == {"documents": 0, "versions": 0, "current": 0, "others": 0}
        assert session.shareable.held() == 0
        assert not server.drafts.cache._shown
        assert not server.workspace.text_documents
        server.scheduler.submit(lambda: None).result(timeout=60)  # the engine thread's queue
        assert session.engine.released == cycle + 1  # once all closed, not once per close


def test_a_closed_document_leaves_the_others_index(tokenizer: Any) -> None:
    """The index over the other open documents drops a closed one without waiting for a
    request: its text is no longer matched, and its tokens are freed."""
    memory = MatchIndexes(tokenizer)
    ids = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    here, gone, kept = "file:///here.py", "file:///gone.py", "file:///kept.py"
    docs = {
        here: "x = 1\n",
        gone: "value = transmogrify_gadgets(gamma)\n",
        kept: "result = frobnicate_widgets(alpha, beta)\n",
    }
    found = memory.source(here, 0, docs).match(ids("value = transmogrify_g"))
    assert found is not None and found.length >= 4
    memory.close(gone)
    memory.wait()
    assert memory.held()["documents"] == 2 and memory.held()["others"] == 1
    del docs[gone]
    source = memory.source(here, 0, docs)
    found = source.match(ids("result = frobnicate_widgets("))
    assert found is not None and found.length >= 4
    assert source.match(ids("value = transmogrify_g")) is None


def test_closing_the_last_document_gives_the_kv_cache_back(tiny_engine: Any) -> None:
    """Issue 51 item 7: a server whose documents all closed held what their prompts cost
    (the KV cache of the last prompt, its rows and positions), and a warm-up queued for a
    closed document filled it again after the close."""
    from superposed.fast_runner import FastRunner
    from superposed.model import LoadedModel

    loaded: LoadedModel = tiny_engine.loaded
    engine = type(tiny_engine)(loaded, runner=FastRunner(loaded.model, "fp32"))
    engine.runner.prefill(list(range(1, 200)))
    engine.runner.expand(3)
    assert engine.runner.cache.capacity > 0
    engine.release()
    assert engine.runner.cache.capacity == 0 and engine.runner.length == 0
    assert engine.runner.cache.keys.numel() == 0


def test_a_warm_up_queued_for_a_closed_document_is_cancelled(tokenizer: Any) -> None:
    server, session = _server(tokenizer)
    uri = "file:///w/a.py"
    item = types.TextDocumentItem(uri, "python", 1, TEXT.format(n=0))
    server.workspace.put_text_document(item)
    warming = server.scheduler._warming = threading.Event()
    server.workspace.remove_text_document(uri)
    did_close(server, types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    assert warming.is_set()
