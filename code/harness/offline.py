"""Keep tests away from the learner's real settings: no provider keys, no .env, a private cache."""

from __future__ import annotations

import os
from pathlib import Path

# Every variable config.py reads that could point a test at a real provider.
PROVIDER_VARIABLES = (
    "GROQ_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
    "COPILOT_MODEL", "COPILOT_API_BASE", "COPILOT_API_KEY", "EMBEDDING_MODEL", "EMBEDDING_API_BASE",
    "COPILOT_LOCAL",  # decides local vs hosted budgets (issue 28): a learner's export must not steer tests
)


def offline_settings(cache_dir: Path) -> dict[str, str]:
    """What an offline run sets: no .env files, a private cache, LiteLLM's bundled price map."""
    return {
        "COPILOT_NO_DOTENV": "1",
        "COPILOT_CACHE_DIR": str(cache_dir),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


def offline_env(cache_dir: Path, **extra: str) -> dict[str, str]:
    """An environment for a subprocess: this one, minus provider settings, plus offline settings."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    env.update(offline_settings(cache_dir), **extra)
    return env


def go_offline(monkeypatch, cache_dir: Path) -> Path:
    """The same, for this process (undone by pytest's monkeypatch after the test)."""
    for key in PROVIDER_VARIABLES:
        monkeypatch.delenv(key, raising=False)
    for key, value in offline_settings(cache_dir).items():
        monkeypatch.setenv(key, value)
    return cache_dir
