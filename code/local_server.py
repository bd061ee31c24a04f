"""A model served on this machine (llama.cpp's llama-server, Ollama, LM Studio, vLLM...): the few
things the copilot does differently for it. A hosted provider gets none of them: no extra request,
no other timeout, no other context.

    is_local(api_base)                  the base URL names this machine (localhost or a loopback address)
    is_local_model(settings)            the model is served there (not a hosted provider's API behind a proxy)
    context_window(settings)            the server's context length in tokens (llama-server's /props), or None
    context_budget(settings, fixed)     characters of injected context that fit that window, with a note

Why: on a laptop CPU, a 1.5 B model reads a copilot prompt (about 3,000 tokens) at 10-50 tokens per
second, so its first reply takes minutes (bench/README.md, "A local model"), and a server started
with a small context (``-c 2048``) rejects a prompt that does not fit it. The timeout for a local
server is llm.request_timeout's; recovering tool calls written as text is text_calls.py's.
"""

from __future__ import annotations

import ipaddress
import json
import urllib.request
from urllib.parse import urlsplit, urlunsplit

HOSTED_APIS = ("groq", "anthropic", "gemini")  # LiteLLM prefixes of providers with their own API
# A reply's tokens (llm.answer_cap): the 1.5B model once repeated itself for 3,140 tokens at 5 a second
# and met the timeout; 1,024 is three times its longest real answer in bench_local.py.
LOCAL_ANSWER_TOKENS = 1_024
LOCAL_TIMEOUT_FACTOR = 10     # a local server's model call may take 10 x llm.REQUEST_TIMEOUT (600 s): a CPU reads ~50 tokens/s
PROPS_TIMEOUT = 3.0           # asking the server for its context window: it answers at once or not at all
ANSWER_ROOM = 1_024           # tokens of the window left for the model's reply
RENDERED_SIZE = 1.25          # snippets as shown (line numbers, headers) against their text alone
MAX_WINDOW = 100_000_000      # tokens; a server claiming more is not believed (the window is then unknown)
CHARS_PER_TOKEN = 3           # code and English, counted low: an overestimate of tokens is the safe side


def is_local(api_base) -> bool:
    """True for http://localhost:8091/v1, http://127.0.0.1:11434 or http://[::1]:8000/v1; False for
    anything else, a LAN address included (that machine may be as fast as a provider)."""
    try:
        host = urlsplit(str(api_base or "")).hostname
    except ValueError:
        return False
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_local_model(settings) -> bool:
    """The model runs on this machine: a loopback base URL (or Ollama's default, which is one) for a
    model that is not a hosted provider's own API. groq/, anthropic/ and gemini/ at a loopback
    address are a proxy or a test's fake in front of a hosted model, and are treated as hosted."""
    model = getattr(settings, "model", None) or ""
    prefix = model.split("/", 1)[0] if "/" in model else "openai"
    base = getattr(settings, "api_base", None)
    if prefix in HOSTED_APIS:
        return False
    return prefix in ("ollama", "ollama_chat") if base is None else is_local(base)


def context_window(settings, opener=urllib.request.urlopen) -> int | None:
    """The context length the local server runs with, in tokens; None when it does not say.

    Asks llama-server's ``/props`` (``default_generation_settings.n_ctx``) at the base URL's host,
    only for a local server, with a short timeout. ``opener`` is urlopen (tests pass a fake).
    """
    base = getattr(settings, "api_base", None)
    if not base or not is_local_model(settings):
        return None
    parts = urlsplit(base)
    url = urlunsplit((parts.scheme or "http", parts.netloc, "/props", "", ""))
    try:
        with opener(url, timeout=PROPS_TIMEOUT) as response:
            props = json.loads(response.read(1_000_000))
        n_ctx = props["default_generation_settings"]["n_ctx"]
    except Exception:  # not llama-server, not running, not JSON: the window is unknown, nothing changes
        return None
    believable = isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and 0 < n_ctx <= MAX_WINDOW
    return n_ctx if believable else None  # a 4,000-digit "window" would overflow the arithmetic below


def context_budget(settings, fixed_chars: int, budget: int, window=None) -> tuple[int, str | None]:
    """(characters of injected context, a note or None): ``budget`` unless the local server's context
    window cannot hold it beside ``fixed_chars`` (system prompt, tool schemas, question) and
    ANSWER_ROOM tokens for the reply. ``window`` is context_window's answer (asked when None)."""
    window = context_window(settings) if window is None else window
    if not window:
        return budget, None
    room = int(((window - ANSWER_ROOM) * CHARS_PER_TOKEN - fixed_chars) / RENDERED_SIZE)
    if room >= budget:
        return budget, None
    room = max(room, 0)
    return room, (f"context: the server's window is {window:,} tokens; the injected context is cut to "
                  f"{room:,} characters (of {budget:,}) to leave room for the tools and the reply")
