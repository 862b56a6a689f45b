"""Malformed client input: frames with a bad ``Content-Length``, requests with bad params or ids.

pygls 2.1 trusts the client on both counts. Its stdio reader (``pygls/io_.py``, ``run_async``)
reads exactly ``Content-Length`` bytes: a value of 10^14 is one allocation (MemoryError kills
the server), and a non-numeric or wrong value desynchronises it for good (every later header
is read as part of a body or skipped; the server never answers again). A request whose params
do not structure (a negative position) fails inside ``json.loads`` and is never answered; one
whose id is an object fails later, with the traceback in the error sent back.

``FramedStdin`` wraps stdin and hands pygls only well-formed frames of bounded size: after a
bad header it logs what was wrong and resynchronises at the next ``Content-Length:`` header.
``SuperposedProtocol`` answers every request it cannot structure with a one-line error, and
drops (with a log line) a notification it cannot structure. A string field must hold a
string: cattrs' default turns ``"text": null`` into the text ``"None"``, which a didChange
then inserted into the document. A change to a document that was never opened is ignored
(pygls raised KeyError, which clients show as a pop-up), and ``shutdown`` with requests in
flight no longer fails (pygls iterated over its futures while they completed). An internal
error answers with one line; its traceback goes to the log only.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Protocol
from urllib.parse import unquote

import cattrs
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import LanguageServerProtocol, lsp_method

log = logging.getLogger(__name__)

# VS Code does not send documents over 50 MB to extensions; with JSON escaping a didOpen of
# such a document stays under this. A larger frame is skipped, never allocated.
MAX_MESSAGE_BYTES = 128 * 2**20
MAX_HEADER_BYTES = 4096  # a header block longer than this is not a header block
CHUNK_BYTES = 64 * 1024
HEADER = b"Content-Length:"
MAX_ERROR_CHARS = 500  # an internal error's message sent to the client, at most
# A complete header line. Raw CR LF cannot follow digits inside valid JSON (in a string it must
# be escaped; outside one, "Content-Length" cannot stand), so a match inside a body means the
# body ended earlier: its Content-Length was too large.
NEXT_HEADER = re.compile(rb"Content-Length: *\d{1,12}\r\n")
NEXT_HEADER_BYTES = 32  # longest match of NEXT_HEADER
HEADER_LINES = re.compile(rb"[A-Za-z][A-Za-z0-9-]{0,63}:[^\r\n]{0,1024}\r\n")  # Content-Type


class ByteSource(Protocol):
    """What FramedStdin reads: ``sys.stdin.buffer`` (a BufferedReader) or a BytesIO."""

    def read1(self, size: int = ..., /) -> bytes: ...


class FramedStdin:
    """stdin for pygls's reader: one clean frame per message, bad frames skipped with a log line.

    pygls calls ``readline`` until a blank line, then ``read(n)`` with the length it was given;
    both come from the message this class has already framed and checked.
    """

    def __init__(self, source: ByteSource, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self._source = source
        self._max = max_bytes
        self._buf = bytearray()
        self._lines: list[bytes] = []
        self._body = b""
        self._skipped = 0  # bytes skipped since the last message, reported once

    def readline(self) -> bytes:
        if not self._lines:
            body = self._next_body()
            if body is None:
                return b""  # end of input: pygls stops
            self._body = body
            self._lines = [b"Content-Length: %d\r\n" % len(body), b"\r\n"]
        return self._lines.pop(0)

    def read(self, n: int) -> bytes:
        body, self._body = self._body, b""
        return body  # n is the length readline announced for it

    # -- framing ----------------------------------------------------------------------------

    def _fill(self) -> bool:
        chunk = self._source.read1(CHUNK_BYTES)
        self._buf += chunk
        return bool(chunk)

    def _drop(self, n: int) -> None:
        """Drops ``n`` bytes before a header; counts them if they were more than headers."""
        skipped = bytes(self._buf[:n])
        del self._buf[:n]
        if len(skipped) > MAX_HEADER_BYTES or HEADER_LINES.sub(b"", skipped).strip():
            self._skipped += len(skipped)

    def _report_skipped(self) -> None:
        if self._skipped:
            log.error("skipped %d bytes of input that were not a message", self._skipped)
            self._skipped = 0

    def _next_body(self) -> bytes | None:
        """The next message's body, or None at end of input."""
        while True:
            at = self._buf.find(HEADER)
            if at < 0:  # keep only what may be the start of a header
                self._drop(max(0, len(self._buf) - len(HEADER)))
                if not self._fill():
                    self._report_skipped()
                    return None
                continue
            self._drop(at)
            self._report_skipped()
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > MAX_HEADER_BYTES:
                    log.error("a message header has no end within %d bytes", MAX_HEADER_BYTES)
                    del self._buf[: len(HEADER)]  # resynchronise after it
                elif not self._fill():
                    return None
                continue
            value = bytes(self._buf[len(HEADER) : self._buf.find(b"\r\n")]).strip()
            del self._buf[: end + 4]
            length = int(value) if value.isdigit() and len(value) <= 12 else None
            if length is None or not 0 < length <= self._max:
                shown = value[:40].decode("ascii", "replace")
                log.error(
                    "Content-Length %r is not a length from 1 to %d bytes: message skipped",
                    shown,
                    self._max,
                )
                continue  # its body is skipped up to the next header
            return self._read_body(length)

    def _read_body(self, length: int) -> bytes | None:
        """``length`` bytes, or fewer if the next message's header starts inside them."""
        scan = 0
        while True:
            have = len(self._buf)
            found = NEXT_HEADER.search(self._buf, scan, min(have, length + NEXT_HEADER_BYTES))
            if found is not None and found.start() < length:
                log.error(
                    "Content-Length %d is longer than the message (%d bytes): "
                    "resynchronised at the next header",
                    length,
                    found.start(),
                )
                length = found.start()
                break
            if have >= length:
                break
            scan = max(0, have - NEXT_HEADER_BYTES)
            if not self._fill():
                return None
        body = bytes(self._buf[:length])
        del self._buf[:length]
        return body


# -- requests that cannot be structured -----------------------------------------------------


class _Answered:
    """What structure_message returns for a request it already answered with an error."""

    jsonrpc = ""


def _valid_id(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _one_line(exc: BaseException) -> str:
    """The validation problems of ``exc`` in one line, without a traceback."""
    cause = exc.__cause__
    if isinstance(cause, cattrs.BaseValidationError):
        problems = cattrs.transform_error(cause, path="", format_exception=lambda e, _: str(e))
        return "; ".join(p.replace(" @ .", " at ") for p in problems)
    return str(exc)


def _strict_str(value: Any, _: type) -> str:
    """cattrs' structure hook for ``str``: a string, never another value's repr."""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


class SuperposedProtocol(LanguageServerProtocol):
    """pygls's protocol, answering every request: bad params or a bad id get a one-line error."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._converter.register_structure_hook(str, _strict_str)

    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" not in data or "method" not in data:
            return super().structure_message(data)  # nested objects, responses
        method = data["method"]
        if "id" not in data:  # a notification: nobody to answer, so drop it and say why
            try:
                return super().structure_message(data)
            except JsonRpcException as exc:
                log.warning("dropped a %s notification: invalid params: %s", method, _one_line(exc))
                return _Answered()
        if not _valid_id(data["id"]):  # JSON-RPC: Invalid Request, answered with a null id
            message = f"{method}: the request id must be an integer or a string"
            log.warning("rejected a request with id %r: %s", data["id"], message)
            self._reject(None, types.ErrorCodes.InvalidRequest, message)
            return _Answered()
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            message = f"invalid params for {method}: {_one_line(exc)}"
            log.warning("rejected request %r: %s", data["id"], message)
            self._reject(data["id"], types.ErrorCodes.InvalidParams, message)
            return _Answered()

    def handle_message(self, message: Any) -> None:
        if not isinstance(message, _Answered):
            super().handle_message(message)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Any:
        """pygls's handler, for open documents only (others are logged and ignored)."""
        uri = params.text_document.uri
        if unquote(uri) not in self.workspace.text_documents:
            log.warning("ignored a change to %s, which is not open (no didOpen came first)", uri)
            return None
        return (yield from super().lsp_text_document__did_change(params))

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Any:
        """pygls's handler over a copy of the requests in flight, which complete meanwhile."""
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: types.ResponseError | None = None
    ) -> None:
        """pygls's response, with an internal error's traceback left out: pygls logs it
        (``logger.exception``) and put it, with its install paths, in the error's ``data``;
        the client gets the exception's first line."""
        if error is not None and error.code == types.ErrorCodes.InternalError:
            first = error.message.strip().split("\n", 1)[0][:MAX_ERROR_CHARS]
            error = types.ResponseError(code=error.code, message=first or "Internal Error")
        super()._send_response(msg_id, result, error)

    def _reject(self, msg_id: int | str | None, code: int, message: str) -> None:
        """An error response; written as a dict, since pygls's converter would drop a null id."""
        error = {"code": code, "message": message}
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": error})
