"""A local OpenAI-compatible HTTP server that answers from a script: LiteLLM's real code path, offline.

    with FakeServer([tool_reply(("read_file", {"path": "shop/models.py"})),
                     text_reply("Item has price, not cost: shop/models.py:11")]) as server:
        litellm.completion(model="openai/fake", api_base=server.base_url, api_key="x", ...)
        server.chat_requests[1]["messages"]     # exactly what LiteLLM sent the second time

Endpoints on 127.0.0.1 (a free port): POST /v1/chat/completions, POST /v1/embeddings,
GET /v1/models. Every request body is recorded in ``server.requests`` as (path, body), its
headers in ``server.request_headers``. Embeddings are deterministic bag-of-words vectors, so tests
can predict which text is nearest. harness/native_fakes.py reuses this server for the native
Anthropic, Gemini and Ollama APIs. Standard library only.
"""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EMBEDDING_DIMENSIONS = 64
# Every chat reply carries this system_fingerprint, so a copilot run can tell (llm.Usage.scripted)
# that it talked to this server, and the board's M5 does not mistake it for a model (progress.py).
SCRIPTED_FINGERPRINT = "lesson06-fake-server (scripted replies)"
MAX_BODY_BYTES = 8 << 20    # a request larger than this is refused, not read
SOCKET_TIMEOUT = 10         # seconds a connection may sit idle before the handler gives up

# Groq's message for tool_use_failed (the model's raw text is in "failed_generation").
GROQ_TOOL_USE_FAILED = "Failed to call a function. Please adjust your prompt. See 'failed_generation' for more details."


def text_reply(content: str) -> dict:
    """A final answer (no tool calls)."""
    return {"content": content}


def tool_reply(*calls, content=None) -> dict:
    """A turn that calls tools: each call is (name, arguments dict) or (name, raw JSON string)."""
    return {"content": content, "tool_calls": [{"name": n, "arguments": a} for n, a in calls]}


def ended_reply(finish: str, content: str = "") -> dict:
    """A reply that ends for the given reason, in the provider's own words ("length" here,
    "max_tokens" or "refusal" for AnthropicFake, "SAFETY" or "MAX_TOKENS" for GeminiFake), with
    ``content`` as its text (none by default: what a filtered or cut-off reply often carries)."""
    return {"content": content, "finish": finish}


def error_reply(status: int, message: str, kind: str = "invalid_request_error", headers=None, **fields) -> dict:
    """An HTTP error in OpenAI's format (401 authentication, 429 rate limit, 500 ...).

    ``headers`` are sent with it (e.g. {"retry-after": "2"}); ``fields`` go into the error object.
    The native fakes render the same reply in their own error format.
    """
    return {"status": status, "error": {"message": message, "type": kind, "code": None, **fields},
            "headers": dict(headers or {})}


def tool_use_failed_reply(failed_generation: str, message: str = GROQ_TOOL_USE_FAILED) -> dict:
    """Groq's HTTP 400 when the model wrote a tool call Groq could not parse or validate.

    ``failed_generation`` is what the model wrote, e.g. '<function=read_file{"path": "a.py"}</function>'.
    """
    return error_reply(400, message, code="tool_use_failed", failed_generation=failed_generation)


def bag_of_words_vector(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """Each lowercased word adds 1 to a dimension picked by a stable hash (crc32), then unit length."""
    vector = [0.0] * dimensions
    for word in re.findall(r"[a-z]+", text.lower()):
        vector[zlib.crc32(word.encode()) % dimensions] += 1.0
    norm = sum(v * v for v in vector) ** 0.5 or 1.0
    return [v / norm for v in vector]


class FakeServer:
    """Serve ``replies`` in order to chat requests (or call ``replies(body, n)`` for the n-th).

    Running past the end of a list answers HTTP 500 "script exhausted", which shows up as a
    provider error: the loop asked the model more often than the test expected.
    """

    def __init__(self, replies=(), embed=bag_of_words_vector, delay: float = 0.0, signed: bool = True):
        self.replies = replies if callable(replies) else list(replies)
        # signed=False: replies without SCRIPTED_FINGERPRINT, i.e. a server the copilot cannot tell
        # from a real provider's (course checks use it to stand in for one).
        self.fingerprint = SCRIPTED_FINGERPRINT if signed else None
        self.embed = embed
        self.delay = delay  # seconds before each answer, to imitate a slow provider
        self.requests: list[tuple[str, dict]] = []
        self.request_headers: list[dict[str, str]] = []  # lower-cased names, one dict per request
        self._lock = threading.Lock()
        self._httpd = None
        self._thread = None
        self.port = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        handler = type("Handler", (_Handler,), {"server_state": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self._httpd.server_address[1]
        self._httpd.daemon_threads = True
        # a short poll interval: stop() (shutdown) waits up to one interval
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"  # still known after stop(): nothing answers there

    # ------------------------------------------------------------------ what was sent
    @property
    def chat_requests(self) -> list[dict]:
        return [body for path, body in self.requests if path.endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[dict]:
        return [body for path, body in self.requests if path.endswith("/embeddings")]

    # ------------------------------------------------------------------ answers
    def handle(self, method: str, path: str, headers: dict, body: dict):
        """(status, payload, headers) for one request; the native fakes override this."""
        if method == "GET":
            if path.endswith("/models"):
                return 200, {"object": "list", "data": [{"id": "fake", "object": "model"}]}, {}
        elif path.endswith("/chat/completions"):
            return self.answer_chat(body)
        elif path.endswith("/embeddings"):
            return (*self.answer_embeddings(body), {})
        return 404, {"error": {"message": f"no route {path}", "type": "not_found"}}, {}

    def next_reply(self, body: dict, n: int) -> dict:
        """The n-th scripted reply (0-based), or an HTTP 500 "script exhausted"."""
        with self._lock:
            if callable(self.replies):
                return self.replies(body, n)
            if n < len(self.replies):
                return self.replies[n]
        return error_reply(500, f"script exhausted: the test scripted {len(self.replies)} replies", "server_error")

    def answer_chat(self, body: dict):
        n = len(self.chat_requests) - 1
        reply = self.next_reply(body, n)
        if "status" in reply:
            return reply["status"], {"error": reply["error"]}, reply.get("headers", {})
        return 200, chat_completion(body, reply, n, self.fingerprint), {}

    def answer_embeddings(self, body: dict) -> tuple[int, dict]:
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        data = [{"object": "embedding", "index": i, "embedding": self.embed(t)} for i, t in enumerate(texts)]
        tokens = sum(len(str(t).split()) for t in texts)
        return 200, {"object": "list", "data": data, "model": body.get("model", "fake-embed"),
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def chat_completion(body: dict, reply: dict, n: int, fingerprint: str | None = SCRIPTED_FINGERPRINT) -> dict:
    """An OpenAI chat.completion response for ``reply``, with deterministic ids and token counts."""
    message = {"role": "assistant", "content": reply.get("content")}
    calls = reply.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{n}_{i}", "type": "function",
             "function": {"name": c["name"],
                          "arguments": c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"])}}
            for i, c in enumerate(calls)
        ]
    prompt = len(json.dumps(body.get("messages", []))) // 4
    completion = len(json.dumps(message)) // 4
    return {
        "id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": int(time.time()),
        "model": body.get("model", "fake"), "service_tier": "default", "system_fingerprint": fingerprint,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": reply.get("finish") or ("tool_calls" if calls else "stop")}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


class _Handler(BaseHTTPRequestHandler):
    server_state: FakeServer  # set on the subclass made in FakeServer.start
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT

    def do_POST(self):  # noqa: N802 (the http.server naming)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            return self._send(413, {"error": {"message": "request too large", "type": "invalid_request_error"}})
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            return self._send(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
        self._answer("POST", body)

    def do_GET(self):  # noqa: N802
        self._answer("GET", {})

    def _answer(self, method: str, body: dict):
        state = self.server_state
        headers = {k.lower(): v for k, v in self.headers.items()}
        if method == "POST":
            with state._lock:
                state.requests.append((self.path, body))
                state.request_headers.append(headers)
            if state.delay:
                time.sleep(state.delay)
        self._send(*state.handle(method, self.path, headers, body))

    def _send(self, status: int, payload, headers=None):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test): fine
            self.close_connection = True

    def log_message(self, *args):  # keep test output clean
        pass
