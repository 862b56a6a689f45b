"""FramedStdin: the frames pygls reads, from a byte stream with bad headers in it; the
errors SuperposedProtocol answers."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
from pygls.lsp.server import LanguageServer

from lsp_server.protocol import FramedStdin, SuperposedProtocol


def frame(body: bytes, length: int | bytes | None = None) -> bytes:
    """``body`` framed with its own length, or with the length (or header value) given."""
    if not isinstance(length, bytes):
        length = b"%d" % (len(body) if length is None else length)
    return b"Content-Length: " + length + b"\r\n\r\n" + body


def message(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "shutdown"}).encode()


def bodies(stream: bytes, max_bytes: int = 1 << 20) -> list[bytes]:
    """What pygls's reader gets: readline until a blank line, then read(Content-Length)."""
    reader, out = FramedStdin(io.BytesIO(stream), max_bytes), []
    while True:
        header = reader.readline()
        if not header:
            return out
        assert header.startswith(b"Content-Length: ") and reader.readline() == b"\r\n"
        length = int(header.split(b":")[1])
        body = reader.read(length)
        assert len(body) == length
        out.append(body)


def test_good_frames_pass_through_with_other_headers() -> None:
    typed = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
    second = b"Content-Length: %d\r\n" % len(message(2)) + typed + b"\r\n" + message(2)
    assert bodies(frame(message(1)) + second) == [message(1), message(2)]


def test_a_huge_length_is_skipped_without_allocating_it() -> None:
    stream = frame(message(1), 10**14) + frame(message(2))
    assert bodies(stream) == [message(2)]


def test_lengths_that_are_not_numbers_or_zero_are_skipped() -> None:
    for value in (b"twelve", b"-5", b"", b"0", b"9" * 40):
        assert bodies(frame(message(1), value) + frame(message(2))) == [message(2)], value


def test_a_short_length_loses_one_message_not_the_stream() -> None:
    stream = frame(message(1), len(message(1)) - 5) + frame(message(2))
    assert bodies(stream) == [message(1)[:-5], message(2)]


def test_a_long_length_ends_at_the_next_header() -> None:
    stream = frame(message(1), len(message(1)) + 10) + frame(message(2))
    assert bodies(stream) == [message(1), message(2)]


def test_garbage_between_messages_is_skipped() -> None:
    stream = b"hello\r\n\r\n" + frame(message(1)) + b"}}junk" + frame(message(2))
    assert bodies(stream) == [message(1), message(2)]


def test_a_body_may_hold_header_text_in_its_strings() -> None:
    text = json.dumps({"text": "Content-Length: 5\r\n\r\nabcde"}).encode()
    assert bodies(frame(text) + frame(message(2))) == [text, message(2)]


def test_end_of_input_inside_a_body_ends_the_stream() -> None:
    assert bodies(frame(message(1)) + frame(message(2))[:-3]) == [message(1)]


def test_skipped_input_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    junk = b"x" * (1 << 20)  # many reads' worth
    with caplog.at_level(logging.ERROR, logger="lsp_server.protocol"):
        assert bodies(frame(message(1), b"huge") + junk + frame(message(2))) == [message(2)]
    assert [r.getMessage() for r in caplog.records] == [
        "Content-Length 'huge' is not a length from 1 to 1048576 bytes: message skipped",
        f"skipped {len(message(1)) + len(junk)} bytes of input that were not a message",
    ]


class _Sent:
    """A writer that keeps what the protocol sends."""

    def __init__(self) -> None:
        self.data: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.data.append(data)

    def close(self) -> None:
        pass


def test_an_internal_error_answers_one_line_and_logs_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 34 item 8c: pygls sent the whole traceback, install paths included, in the
    error's ``data``."""
    server = LanguageServer("t", "0", protocol_cls=SuperposedProtocol)

    @server.command("fails")
    def fails(ls: Any, *args: Any) -> None:
        raise ValueError("no such thing\nsecond line")

    sent = _Sent()
    server.protocol.set_writer(sent, include_headers=False)
    request = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "workspace/executeCommand",
        "params": {"command": "fails", "arguments": []},
    }
    with caplog.at_level(logging.ERROR):
        server.protocol.handle_message(server.protocol.structure_message(request))
    (answer,) = [json.loads(d) for d in sent.data]
    assert answer["id"] == 7
    assert answer["error"] == {"code": -32603, "message": "ValueError: no such thing"}
    assert "Traceback" in caplog.text and "second line" in caplog.text  # the log has it all
