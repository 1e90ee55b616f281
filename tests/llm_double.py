"""Test double: a local HTTP server speaking the OpenAI chat completions API, standing in for a paid LLM.

It listens on 127.0.0.1 (``http.server`` in a thread) at ``<url>/chat/completions`` and answers
each request from a script: a queue of :class:`Reply` objects consumed in arrival order, then a
``responder(request) -> Reply`` for the rest. Replies cover what real endpoints do: valid JSON,
malformed JSON, names absent from the text, slow answers, 429 with ``Retry-After``, 5xx, garbage
bodies, dropped connections. Every request body is recorded, so tests count calls exactly.

Nothing else in the tests is a double: stores and indexes are the real ones.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted reply: an answer (``content``), or a bare HTTP ``status`` with ``body``."""

    content: str | None = None
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before anything is sent
    drop: bool = False  # close the connection without answering

    @classmethod
    def answer(cls, entities: Iterable[tuple[str, str]] = (), relations: Iterable[tuple[str, str, str]] = (),
               *, confidence: float = 0.9, delay: float = 0.0) -> Reply:
        """A well-formed answer naming these ``(name, type)`` entities and ``(s, p, o)`` relations."""
        doc = {"entities": [{"name": n, "type": t, "confidence": confidence} for n, t in entities],
               "relationships": [{"subject": s, "predicate": p, "object": o, "confidence": confidence}
                                 for s, p, o in relations]}
        return cls(content=json.dumps(doc), delay=delay)

    @classmethod
    def malformed(cls) -> Reply:
        return cls(content='{"entities": [{"name": "Kafka", "type": "technology"')  # cut off mid-object

    @classmethod
    def http(cls, status: int, *, retry_after: str | None = None, body: bytes = b'{"error": "scripted"}') -> Reply:
        return cls(status=status, body=body, headers={"Retry-After": retry_after} if retry_after else {})

    @classmethod
    def garbage(cls) -> Reply:
        return cls(status=200, body=b"<html>502 Bad Gateway</html>")


def text_of(request: dict[str, Any]) -> str:
    """The text a request asks about (between the ``<<<`` and ``>>>`` of its first user message)."""
    for message in request.get("messages", []):
        if message.get("role") == "user":
            content = message["content"]
            start = content.find("<<<\n")
            end = content.rfind("\n>>>")
            return content[start + 4:end] if start >= 0 and end > start else content
    return ""


def is_repair(request: dict[str, Any]) -> bool:
    """Whether the request sends an invalid answer back to be corrected."""
    return any(m.get("role") == "assistant" for m in request.get("messages", []))


def naming(known: Iterable[tuple[str, str]], relations: Iterable[tuple[str, str, str]] = (),
           extra: Iterable[tuple[str, str]] = ()) -> Callable[[dict[str, Any]], Reply]:
    """A responder that names the ``known`` ``(name, type)`` entities occurring in the text (and
    ``extra`` ones whether they occur or not), and the ``relations`` between names it named."""
    known, relations, extra = list(known), list(relations), list(extra)

    def respond(request: dict[str, Any]) -> Reply:
        text = text_of(request).casefold()
        found = [(n, t) for n, t in known if n.casefold() in text] + extra
        names = {n for n, _ in found}
        return Reply.answer(found, [r for r in relations if r[0] in names and r[2] in names])

    return respond


class ChatDouble:
    """The server. Use as a context manager; ``url`` is the base URL to configure."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.responder = responder or (lambda request: Reply.answer())
        self.script: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []  # time.monotonic() of each request's arrival
        self._lock = threading.Lock()
        double = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, b'{"error": "not found"}', {})
                    return
                request = json.loads(raw)
                reply = double._next(request)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.drop:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if reply.content is None:
                    self._send(reply.status, reply.body, reply.headers)
                    return
                prompt = sum(len(m.get("content", "")) for m in request.get("messages", [])) // 4
                completion = len(reply.content) // 4
                body = {
                    "id": f"chatcmpl-{len(double.requests)}", "object": "chat.completion", "created": int(time.time()),
                    "model": request.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply.content}}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                              "total_tokens": prompt + completion},
                }
                self._send(200, json.dumps(body).encode(), {})

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _next(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.times.append(time.monotonic())
            if self.script:
                return self.script.pop(0)
        return self.responder(request)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.requests)

    def __enter__(self) -> ChatDouble:  # noqa: PYI034 - no subclasses; Self needs Python 3.11
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def refused_url() -> str:
    """A base URL nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
