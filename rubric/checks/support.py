"""Helpers shared by the course checks. Not a test file."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


@contextmanager
def deadline(seconds: int):
    """Fail instead of hanging (POSIX, main thread); elsewhere the case simply runs."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise TimeoutError(f"did not return within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
