"""A model served on this machine (llama.cpp's llama-server, Ollama, LM Studio, vLLM...): the few
things the copilot does differently for it. A hosted provider gets none of them: no extra request,
no other timeout, no other context.

    is_local(api_base)                  the base URL's host resolves to this machine only (loopback, 0.0.0.0)
    is_local_model(settings)            the model is served there: COPILOT_LOCAL=1/0 if set, else is_local
    locality(settings)                  the same, with why (for --check)
    context_window(settings)            the server's context length in tokens (llama-server's /props,
                                        Ollama's /api/show), or None
    context_budget(settings, fixed)     characters of injected context that fit that window, with a note

Why: on a laptop CPU, a 1.5 B model reads a copilot prompt (about 3,000 tokens) at 10-50 tokens per
second, so its first reply takes minutes (bench/README.md, "A local model"), and a server started
with a small context (``-c 2048``) rejects a prompt that does not fit it. The timeout for a local
server is llm.request_timeout's; recovering tool calls written as text is text_calls.py's.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
import urllib.request
from urllib.parse import urlsplit, urlunsplit

# A reply's tokens (llm.answer_cap): the 1.5B model once repeated itself for 3,140 tokens at 5 a second
# and met the timeout; 1,024 is three times its longest real answer in bench_local.py.
LOCAL_ANSWER_TOKENS = 1_024
LOCAL_TIMEOUT_FACTOR = 10     # a local server's model call may take 10 x llm.REQUEST_TIMEOUT (600 s): a CPU reads ~50 tokens/s
RESOLVE_TIMEOUT = 2.0         # seconds for the base URL's host to resolve (a local name answers at once)
OLLAMA_DEFAULT_BASE = "http://localhost:11434"  # where LiteLLM sends ollama/ models with no base URL
PROPS_TIMEOUT = 3.0           # asking the server for its context window: it answers at once or not at all
ANSWER_ROOM = 1_024           # tokens of the window left for the model's reply
RENDERED_SIZE = 1.25          # snippets as shown (line numbers, headers) against their text alone
MAX_WINDOW = 100_000_000      # tokens; a server claiming more is not believed (the window is then unknown)
CHARS_PER_TOKEN = 3           # code and English, counted low: an overestimate of tokens is the safe side


def is_local(api_base) -> bool:
    """True when the base URL's host resolves only to this machine: every loopback and unspecified
    form (localhost, 127.0.0.1, 127.1, 2130706433, 0.0.0.0, [::1], [::ffff:127.0.0.1]); False for
    anything else, a LAN address included (that machine may be as fast as a provider)."""
    return where(api_base)[0]


def where(api_base) -> tuple[bool, str]:
    """(on this machine?, why, naming the addresses the base URL's host resolves to)."""
    try:
        host = urlsplit(str(api_base or "")).hostname
    except ValueError:
        return False, "the base URL cannot be parsed"
    if not host:
        return False, "the base URL names no host"
    if host == "localhost" or host.endswith(".localhost"):  # loopback by definition (RFC 6761), no lookup
        return True, f"{host} is this machine"
    addresses = resolve(host)
    if not addresses:
        return False, f"{host} does not resolve to an address"
    shown = ", ".join(sorted({str(a) for a in addresses})[:3])
    said = f"{host} is" if shown == host else f"{host} resolves to {shown},"
    if all(_this_machine(a) for a in addresses):
        return True, f"{said} this machine"
    return False, f"{said} not only this machine" if len(addresses) > 1 else f"{said} another machine"


def _this_machine(address) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is 127.0.0.1
    address = mapped or address
    return address.is_loopback or address.is_unspecified  # 0.0.0.0 and :: reach this machine too


_RESOLVED: dict[str, list] = {}


def resolve(host: str) -> list:
    """The addresses ``host`` resolves to ([] when it does not within RESOLVE_TIMEOUT s), remembered.

    A literal address is read as one (no lookup); other forms (127.1, 2130706433, a name) go through
    the system's resolver, as the connection to the server will."""
    try:
        return [ipaddress.ip_address(host.split("%", 1)[0])]
    except ValueError:
        pass
    if host not in _RESOLVED:
        found: list = []

        def lookup():
            try:
                infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
                found.extend(ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos)
            except (OSError, ValueError, UnicodeError):
                pass

        worker = threading.Thread(target=lookup, name="resolve", daemon=True)
        worker.start()
        worker.join(RESOLVE_TIMEOUT)
        _RESOLVED[host] = list(found) if not worker.is_alive() else []
    return _RESOLVED[host]


def is_local_model(settings) -> bool:
    """The model runs on this machine (locality: COPILOT_LOCAL if set, else where the base URL's host
    resolves to). The model's name decides nothing: a local server's models are called openai/<alias>,
    and a loopback proxy may stand in front of a hosted model (set COPILOT_LOCAL=0 for it)."""
    return locality(settings)[0]


def locality(settings) -> tuple[bool, str]:
    """(local?, why): what is_local_model decided, in words for --check."""
    said = getattr(settings, "local", None)
    if said is not None:
        return bool(said), f"COPILOT_LOCAL={int(bool(said))} says so"
    base = getattr(settings, "api_base", None)
    if base is None:
        model = getattr(settings, "model", None) or ""
        if model.split("/", 1)[0] in ("ollama", "ollama_chat"):
            return True, "no COPILOT_API_BASE: Ollama's default, localhost:11434"
        return False, "no COPILOT_API_BASE: the provider's own API"
    return where(base)


def context_window(settings, opener=urllib.request.urlopen) -> int | None:
    """The context length the local server runs with, in tokens; None when it does not say.

    Asks llama-server's ``/props`` (``default_generation_settings.n_ctx``) at the base URL's host,
    or for an ollama/ or ollama_chat/ model Ollama's ``/api/show`` (the ``num_ctx`` it was given,
    else the model's own ``<family>.context_length``), only for a local server, with a short
    timeout. ``opener`` is urlopen (tests pass a fake).
    """
    model = getattr(settings, "model", None) or ""
    prefix, _, name = model.partition("/")
    ollama = prefix in ("ollama", "ollama_chat")
    base = getattr(settings, "api_base", None) or (OLLAMA_DEFAULT_BASE if ollama else None)
    if not base or not is_local_model(settings):
        return None
    parts = urlsplit(base)
    root = (parts.scheme or "http", parts.netloc)
    try:
        if ollama:
            url = urlunsplit((*root, "/api/show", "", ""))
            asked = urllib.request.Request(url, data=json.dumps({"model": name}).encode(),
                                           headers={"Content-Type": "application/json"})
            with opener(asked, timeout=PROPS_TIMEOUT) as response:
                n_ctx = _ollama_window(json.loads(response.read(4_000_000)))
        else:
            with opener(urlunsplit((*root, "/props", "", "")), timeout=PROPS_TIMEOUT) as response:
                props = json.loads(response.read(1_000_000))
            n_ctx = props["default_generation_settings"]["n_ctx"]
    except Exception:  # not that server, not running, not JSON: the window is unknown, nothing changes
        return None
    believable = isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and 0 < n_ctx <= MAX_WINDOW
    return n_ctx if believable else None  # a 4,000-digit "window" would overflow the arithmetic below


def _ollama_window(show: dict):
    """From /api/show's answer: "num_ctx N" among its parameters, else model_info's *.context_length."""
    for line in str(show.get("parameters") or "").splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "num_ctx" and value.strip().isdigit() and len(value.strip()) <= 9:
            return int(value.strip())
    info = show.get("model_info") or {}
    lengths = [v for k, v in info.items() if isinstance(k, str) and k.endswith(".context_length")]
    return lengths[0] if lengths else None


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
