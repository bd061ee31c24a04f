"""Which implementation an M6 run uses, and a real model for --model.

Shared by break_and_observe.py and evaluate.py: ``use_implementation`` puts code/, the reference
(rubric/reference/) or another folder first on sys.path before the lab modules are imported;
``load_lab`` imports tools and agent_loop from there; ``real_model`` wraps llm.make_complete.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.paths import CODE_DIR, REFERENCE_DIR


@dataclass
class Lab:
    """The two lab modules a scenario runs: ``tools`` and ``agent_loop``."""

    tools: object
    agent_loop: object
    label: str


def use_implementation(choice: str | None) -> str:
    """Put the chosen implementation first on sys.path (before `import tools`); return its label.

    ``choice`` is "reference", "code", a directory, or None for LESSON06_IMPL (default "code").
    """
    choice = choice or os.environ.get("LESSON06_IMPL") or "code"
    if choice == "reference":
        folder, label = REFERENCE_DIR, "reference (rubric/reference/)"
    elif choice == "code":
        folder, label = CODE_DIR, "your code (code/)"
    else:
        folder, label = Path(choice).resolve(), str(choice)
    sys.path.insert(0, str(folder))
    os.environ["LESSON06_IMPL"] = choice
    return label


def load_lab(label: str | None = None) -> Lab:
    """Import tools and agent_loop from wherever sys.path points (see use_implementation)."""
    tools = importlib.import_module("tools")
    agent_loop = importlib.import_module("agent_loop")
    if label is None:
        where = Path(agent_loop.__file__).resolve().parent
        label = "reference (rubric/reference/)" if where == REFERENCE_DIR else f"your code ({where.name}/)"
    return Lab(tools, agent_loop, label)


def real_model(model_name: str | None, api_base: str | None):
    """(complete, totals, label) for a real model through llm.py's LiteLLM wiring.

    ``totals()`` returns the tokens (in, out) spent so far, as the provider reported them.
    Raises config.ConfigError when no provider is configured.
    """
    import config
    import llm  # LiteLLM itself is imported on the first call (~3 s); only --model needs it

    settings = config.load_settings(model=model_name, api_base=api_base)
    usage = llm.Usage()
    complete = llm.make_complete(settings, usage)
    return complete, lambda: (usage.prompt_tokens, usage.completion_tokens), f"real model: {settings.model}"

