"""LiteLLM on the lab's terms: imported without reading anyone's .env, called with a deadline.

    import_litellm()                      ``import litellm``, with its own .env loading switched off
    within_deadline(call, seconds, ...)   call(...), or DeadlineExceeded once ``seconds`` have passed

llm.py (the chat call) and embeddings.py (the embedding call) use both; nothing else imports
LiteLLM. Standard library only, so importing this module costs nothing.
"""

from __future__ import annotations

import contextvars
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
    warnings are silenced, and the warnings its reply conversion raises are kept off the terminal.
    """
    litellm = sys.modules.get("litellm") or _import_without_dotenv()
    # pydantic's "serializer warnings" about a malformed reply: the one line of describe_error says it
    warnings.filterwarnings("ignore", module=r"pydantic(\.|$)")
    warnings.filterwarnings("ignore", module=r"litellm(\.|$)")
    litellm.suppress_debug_info = True  # set each time: whoever imported it first may not have
    return litellm


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
