"""A loopback HTTP server that answers every POST with fixed raw bytes: replies no well-behaved
fake would build (JSON nested thousands deep, a non-string tool name), or one byte at a time.

    with RawServer(chat_body(calls_json)) as server:       # server.base_url, server.hits
    with RawServer(body, drip=0.5) as server:              # one byte every half second

Used by test_hostile_round3.py and code/bench/bench_hostile.py. Standard library only.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RawServer:
    def __init__(self, body: bytes, drip: float = 0.0, status: int = 200):
        self.body, self.drip, self.status, self.hits = body, drip, status, 0
        self._stop = threading.Event()

    def __enter__(self):
        state = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 (http.server's naming)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                state.hits += 1
                self.send_response(state.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(state.body)))
                self.end_headers()
                try:
                    if not state.drip:
                        self.wfile.write(state.body)
                        return
                    for i in range(len(state.body)):
                        if state._stop.wait(state.drip):
                            return
                        self.wfile.write(state.body[i:i + 1])
                        self.wfile.flush()
                except OSError:  # the client gave up: that is the point of a drip
                    self.close_connection = True

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def chat_body(tool_calls_json: str | None = None, content_json: str = "null") -> bytes:
    """A chat.completion whose message has ``content_json`` and, raw, ``tool_calls_json``."""
    calls = f',"tool_calls":{tool_calls_json}' if tool_calls_json is not None else ""
    finish = "tool_calls" if tool_calls_json is not None else "stop"
    return ('{"id":"x","object":"chat.completion","created":1,"model":"fake","choices":[{"index":0,'
            f'"message":{{"role":"assistant","content":{content_json}{calls}}},"finish_reason":"{finish}"}}],'
            '"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}').encode()


def one_call(function_json: str) -> str:
    """A tool_calls array holding one call with the given raw ``function`` member ('' for none)."""
    function = f',"function":{function_json}' if function_json else ""
    return f'[{{"id":"call_1","type":"function"{function}}}]'
