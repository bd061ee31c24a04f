"""LiteLLM on the lab's terms: imported without reading anyone's .env, called with a deadline.

    import_litellm()                      ``import litellm``, with its own .env loading switched off
    within_deadline(call, seconds, ...)   call(...), or DeadlineExceeded once ``seconds`` have passed

llm.py (the chat call) and embeddings.py (the embedding call) use both; nothing else imports
LiteLLM. Standard library only, so importing this module costs nothing.
"""

from __future__ import annotations

import contextvars
import logging
import os
import sys
import threading
import warnings


def import_litellm():
    """``import litellm``, without letting it configure the run from a .env file.

    LiteLLM's import calls python-dotenv's load_dotenv(), which reads the first .env found above
    LiteLLM's own folder, or the current folder's under ``python -c``, a debugger or coverage: a
    planted OPENAI_BASE_URL there would receive the key and the conversation. Only config.py's
    settings may configure a run, so the import runs with that loader switched off (LITELLM_MODE
    too), and any variable that appears or changes meanwhile is put back. Its import-time
    warnings are silenced, the warnings its reply conversion raises are kept off the terminal, and
    its log lines reach stderr escaped, warnings and errors only (_escape_its_logs).
    """
    litellm = sys.modules.get("litellm") or _import_without_dotenv()
    # pydantic's "serializer warnings" about a malformed reply: the one line of describe_error says it
    warnings.filterwarnings("ignore", module=r"pydantic(\.|$)")
    warnings.filterwarnings("ignore", module=r"litellm(\.|$)")
    litellm.suppress_debug_info = True  # set each time: whoever imported it first may not have
    _escape_its_logs()
    return litellm


# LiteLLM's own loggers. Their records quote what a server sent ("Unmapped finish_reason '...'"),
# which may hold ESC and BEL; and its handler writes records below WARNING to stdout.
LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


class _EscapedLog(logging.Filter):
    """Lets through only warnings and errors, each as one line with control characters escaped."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return False  # debug and info: LiteLLM sends them to stdout, which is the answer's
        from cli import terminal_safe  # lazy: this module stays standard library at import

        try:
            text = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: say so, not raise
            text = str(record.msg)
        record.msg, record.args = terminal_safe(" ".join(text.split()))[:500], None
        record.exc_info = record.exc_text = record.stack_info = None  # a traceback is not for the terminal
        return True


_LOG_FILTER = _EscapedLog()


def _escape_its_logs() -> None:
    """Put _LOG_FILTER on LiteLLM's loggers and on every handler they write through (a logger's filter
    does not see records from its children; a handler's does), once each."""
    for name in LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        for owner in (logger, *logger.handlers):
            if _LOG_FILTER not in owner.filters:
                owner.addFilter(_LOG_FILTER)


def _import_without_dotenv():
    import dotenv

    before = dict(os.environ)
    loader = dotenv.load_dotenv
    dotenv.load_dotenv = lambda *args, **kwargs: False
    os.environ["LITELLM_MODE"] = "PRODUCTION"  # LiteLLM's own switch for that loader
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import litellm
    finally:
        dotenv.load_dotenv = loader
        for name in set(os.environ) - set(before):
            del os.environ[name]
        os.environ.update({k: v for k, v in before.items() if os.environ.get(k) != v})
    return litellm


class DeadlineExceeded(TimeoutError):
    """A provider call that outlasted its wall-clock deadline; LiteLLM's timeout is per read, so a
    server sending one byte a second never trips it."""


def within_deadline(call, seconds: float, *args, **kwargs):
    """``call(*args, **kwargs)``, or DeadlineExceeded once ``seconds`` have passed in all.

    The call runs in a daemon thread, which is left to finish (or fail) on its own after the
    deadline: its result is dropped, and it cannot keep the program from exiting.
    """
    box: dict = {}

    def run():
        try:
            box["value"] = call(*args, **kwargs)
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    context = contextvars.copy_context()  # the call sees the caller's context variables, as it would inline
    worker = threading.Thread(target=context.run, args=(run,), name="provider-call", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise DeadlineExceeded(f"no complete reply within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]
