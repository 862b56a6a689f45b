"""End-to-end: malformed input over a raw stdio connection, written byte by byte.

pytest-lsp's client only writes well-formed messages; these tests write bad frames (a huge,
non-numeric, negative, too short or too long ``Content-Length``) and requests the server
cannot structure (negative or huge positions, an object as id), and check that the server
answers every request that follows, and every request it could read, within a bounded wait.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.lsp_harness import server_env

pytestmark = pytest.mark.slow  # every test starts the server as a process

WAIT_S = 30.0  # for one answer; the server imports torch at start, on a shared machine


class RawClient:
    """The server as a subprocess; messages read by a thread into a queue."""

    def __init__(self, tmp: Path) -> None:
        self.log = tmp / "server.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lsp_server.cli", "-v", "--log-file", str(self.log)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=server_env(tmp),
        )
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.responses: dict[str, dict[str, Any]] = {}  # by JSON id
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            length = None
            while (line := stdout.readline()).strip():
                if line.startswith(b"Content-Length:"):
                    length = int(line.split(b":")[1])
            if not line or length is None:
                self.messages.put(None)  # the server closed its stdout
                return
            self.messages.put(json.loads(stdout.read(length)))

    def write(self, data: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(data)
        stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def answer(self, msg_id: Any, timeout: float = WAIT_S) -> dict[str, Any]:
        """The response to request ``msg_id``; responses to others are kept for later."""
        deadline = time.monotonic() + timeout
        while (key := json.dumps(msg_id)) not in self.responses:
            try:
                message = self.messages.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                message = f"no answer to request {msg_id!r} within {timeout} s"
                raise AssertionError(message) from None
            assert message is not None, f"the server closed stdout before answering {msg_id!r}"
            if "method" not in message:  # a response, not a request or notification
                self.responses[json.dumps(message.get("id"))] = message
        return self.responses.pop(key)

    def close(self) -> int:
        """Shuts the server down as a client does; its exit status."""
        self.send({"id": "bye", "method": "shutdown"})
        assert "result" in self.answer("bye")
        self.send({"method": "exit"})
        return self.process.wait(timeout=WAIT_S)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[RawClient]:
    client = RawClient(tmp_path)
    try:
        client.send({"id": 0, "method": "initialize", "params": {"capabilities": {}}})
        assert "result" in client.answer(0)
        yield client
    finally:
        if client.process.poll() is None:
            client.process.kill()
            client.process.wait()


def stats(client: RawClient, msg_id: int) -> dict[str, Any]:
    client.send(
        {
            "id": msg_id,
            "method": "workspace/executeCommand",
            "params": {"command": "superposed.stats"},
        }
    )
    return client.answer(msg_id)


def test_bad_content_length_is_skipped_and_the_next_request_answered(client: RawClient) -> None:
    """Every bad frame is followed by a request that gets its answer; the server stays up."""

    def request(msg_id: int) -> bytes:
        return json.dumps(
            {
                "jsonrpc": "2.0",
                "id": msg_id,
                "method": "workspace/executeCommand",
                "params": {"command": "superposed.stats"},
            }
        ).encode()

    bad_frames = {
        "huge": b"Content-Length: 100000000000000\r\n\r\n" + request(101),
        "not a number": b"Content-Length: twelve\r\n\r\n" + request(102),
        "negative": b"Content-Length: -5\r\n\r\n" + request(103),
        "too short": b"Content-Length: %d\r\n\r\n" % (len(request(104)) - 7) + request(104),
    }
    for n, (name, frame) in enumerate(bad_frames.items(), 1):
        client.write(frame)
        assert "result" in stats(client, n), name

    # Too long: the server waits for the rest, which is the next message; it answers both.
    long = request(200)
    client.write(b"Content-Length: %d\r\n\r\n" % (len(long) + 10) + long)
    time.sleep(0.5)
    assert "result" in stats(client, 10)
    assert "result" in client.answer(200)

    assert client.close() == 0
    log = client.log.read_text()
    assert "'100000000000000' is not a length" in log
    assert "'twelve' is not a length" in log
    assert f"Content-Length {len(long) + 10} is longer than the message" in log


@pytest.mark.parametrize(
    "position",
    [
        {"line": -1, "character": 0},
        {"line": 0, "character": -5},
        {"line": 2**40, "character": 0},
        {"line": "one", "character": 0},
    ],
)
def test_invalid_positions_get_invalid_params(client: RawClient, position: Any) -> None:
    uri = "file:///tmp/superposed-test/x.py"
    client.send(
        {
            "method": "textDocument/didOpen",
            "params": {
                "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": "x\n"}
            },
        }
    )
    for n, method in enumerate(["textDocument/completion", "textDocument/inlineCompletion"], 1):
        params = {"textDocument": {"uri": uri}, "position": position}
        if method == "textDocument/inlineCompletion":
            params["context"] = {"triggerKind": 1}
        client.send({"id": n, "method": method, "params": params})
        error = client.answer(n)["error"]
        assert error["code"] == -32602, error  # InvalidParams
        message = error["message"]
        assert method in message and "position" in message, message
        assert "\n" not in message and "Traceback" not in message
        assert not error.get("data"), error  # no traceback attached
    # Out of the document but a valid position: an answer, not an error.
    client.send(
        {
            "id": 3,
            "method": "textDocument/completion",
            "params": {"textDocument": {"uri": uri}, "position": {"line": 1000, "character": 7}},
        }
    )
    assert client.answer(3)["result"]["items"] == []
    assert client.close() == 0


@pytest.mark.parametrize("bad_id", [{"a": 1}, [1], 1.5, True])
def test_request_with_a_bad_id_gets_a_one_line_error(client: RawClient, bad_id: Any) -> None:
    client.send({"id": bad_id, "method": "workspace/executeCommand", "params": {"command": "x"}})
    response = client.answer(None)  # JSON-RPC: an id that cannot be read is answered as null
    assert "id" in response and response["id"] is None
    error = response["error"]
    assert error["code"] == -32600, error  # InvalidRequest
    assert "request id" in error["message"] and "\n" not in error["message"]
    assert not error.get("data"), error
    assert "result" in stats(client, 7)  # and the server goes on
    assert client.close() == 0
