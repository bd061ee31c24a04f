"""What the lab's command-line scripts share: copilot.py, evaluate.py and break_and_observe.py.

run_main: a reader that closes the pipe early (``| head``) ends a script quietly, as it ends any
Unix tool. NotDoneYet and first_not_done: a learner-owned function that is still a stub becomes
one line naming the earliest milestone left to do, instead of a traceback.
"""

from __future__ import annotations

import json
import os
import re
import sys
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


# ESC, BEL, CSI and friends: from a file name, a file's contents, the model's text or a server's
# error they would drive the terminal (colours, the window title, the clipboard through OSC 52,
# clearing the screen). Newline and tab stay; bidi overrides are escaped too (they reorder what
# you read), and lone surrogates (which no terminal can encode: a traceback at print time).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")
# The same characters (and tab and newline, which JSON escapes itself) in JSON text: only inside strings.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")
# scheme://user:secret@host and ?key=secret in a URL, wherever a URL is printed.
_URL = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)([^\s/?#@]*@)?([^\s?#'\"]*)(\?[^\s#'\"]*)?")
_SECRET_PARAM = re.compile(r"key|token|secret|sig|signature|password|auth|credential", re.I)


def terminal_safe(text) -> str:
    """``text`` with every control character written as a visible escape (ESC becomes \\x1b)."""
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                       else f"\\u{ord(m.group()):04x}", str(text))


def json_text(value, **options) -> str:
    """json.dumps(value, ensure_ascii=False) with C1 controls, bidi overrides and lone surrogates
    escaped as \\uXXXX (still the same JSON), so printing it cannot drive or fool a terminal."""
    text = json.dumps(value, ensure_ascii=False, **options)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def redact_url(url) -> str:
    """A URL safe to print: no user:password@, and the values of key-like query parameters hidden
    (https://user:KEY@host/v1?api_key=K becomes https://host/v1?api_key=***)."""
    try:
        parts = urlsplit(str(url))
        host = parts.netloc.rpartition("@")[2]
        query = urlencode([(k, "***" if _SECRET_PARAM.search(k) else v) for k, v in parse_qsl(parts.query, True)],
                          safe="*")
        return urlunsplit((parts.scheme, host, parts.path, query, ""))
    except ValueError:
        return "<a URL that cannot be parsed>"


def redact_urls(text: str) -> str:
    """Every URL in ``text`` through redact_url (error messages quote the address they tried)."""
    def redact(match) -> str:
        url = match.group()
        trail = len(url) - len(url.rstrip(".,:;)"))  # "... at https://h/v1: refused": the colon is the sentence's
        url, tail = (url[:-trail], url[-trail:]) if trail else (url, "")
        return (redact_url(url) if match.group(2) or "?" in url else url) + tail

    return _URL.sub(redact, str(text))


class NotDoneYet(NotImplementedError):
    """A learner-owned function still raises NotImplementedError; the message starts with "M<n>:"."""


def run_main(main) -> int:
    """Run a command-line ``main()``: a reader that closes the pipe early (``| head -3``) ends it
    quietly, as it ends any Unix tool, instead of with a BrokenPipeError."""
    try:
        code = main()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's own flush at exit cannot fail again
        return 141  # 128 + SIGPIPE: what a shell reports for a tool stopped by a closed pipe


def first_not_done(raised: str) -> str:
    """The stub message of the EARLIEST milestone whose function is still a stub, which may come
    before the one that raised (run_agent, M4, is called first, but M1-M3 may not be done either)."""
    import ast
    import inspect
    import textwrap

    from harness.milestones import MILESTONES  # the course, in order (lazy: only on this error)

    for milestone in MILESTONES:
        if raised.startswith(f"{milestone.id}:"):
            return raised
        for qualified in milestone.functions:
            module, name = qualified.split(".")
            fn = getattr(sys.modules.get(module), name, None)
            try:
                body = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0].body
            except (TypeError, OSError, SyntaxError, IndexError, AttributeError):
                continue
            body = body[1:] if body and isinstance(body[0], ast.Expr) else body  # the docstring
            if len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.dump(body[0]):
                try:
                    return ast.literal_eval(body[0].exc.args[0])
                except (AttributeError, IndexError, ValueError):
                    return f"{milestone.id}: {qualified} is not implemented yet"
    return raised
