"""SCRIPTED runs for evaluate.py. These are NOT model output.

Each question in fixture_questions.jsonl and lab_questions.jsonl has a scripted "good" run and a
scripted "bad" run, so that ``python evaluate.py`` works offline and shows what each component
measures. Only the decisions are scripted: every tool call really goes through your run_agent and
the real tools, and every citation is checked against what the run really saw.

A run is a list of steps (tool calls, one model turn each), then a final answer. In the answer,
``[[path|text]]`` becomes ``path:N``, where N is the first line containing ``text`` that this run
was shown (by a tool or by the injected context); ``[[path|a|b]]`` becomes ``path:N-M``. A scripted
model can only cite lines it has seen, like a careful model. If it saw no such line, the
placeholder becomes the bare path (no line, so no citation).

The bad runs fail on purpose, each in one labelled way (``failure``), for example the "right
evidence, wrong answer" case: the right files read, then a conclusion that names only ``cost``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.scripted import answer, call, turn

HEADER = re.compile(r"^\[(?:File: (?P<file>.+?) \(|Snippet: (?P<snippet>.+?) lines )")
NUMBERED = re.compile(r"^\s*(\d+)\| ?(.*)$")
SEARCH_HIT = re.compile(r"^([^\s:\[][^:]*):(\d+): (.*)$")
PLACEHOLDER = re.compile(r"\[\[([^|\]]+)\|([^|\]]+)(?:\|([^\]]+))?\]\]")


def seen_lines(messages) -> dict[str, dict[int, str]]:
    """path -> {line number: text} for every numbered line the run was shown (context or tools)."""
    seen: dict[str, dict[int, str]] = {}
    for message in messages:
        if message.get("role") not in ("user", "tool"):
            continue
        text = str(message.get("content") or "")
        if text.startswith("Error:"):
            continue
        path = None
        for line in text.splitlines():
            header = HEADER.match(line)
            if header:
                path = header.group("file") or header.group("snippet")
                continue
            numbered = NUMBERED.match(line)
            if numbered and path:
                seen.setdefault(path, {})[int(numbered.group(1))] = numbered.group(2)
                continue
            hit = SEARCH_HIT.match(line) if message.get("role") == "tool" else None
            if hit:
                seen.setdefault(hit.group(1), {})[int(hit.group(2))] = hit.group(3)
    return seen


def _first_line(seen, path, needle, after=0):
    return next((n for n, text in sorted(seen.get(path, {}).items()) if n >= after and needle in text), None)


def resolve(template: str, seen) -> str:
    """Replace each [[path|text]] / [[path|a|b]] with a citation to lines the run has seen."""

    def cite(match):
        path, first, last = match.group(1), match.group(2), match.group(3)
        start = _first_line(seen, path, first)
        if start is None:
            return path
        end = _first_line(seen, path, last, after=start) if last else None
        return f"{path}:{start}" + (f"-{end}" if end and end != start else "")

    return PLACEHOLDER.sub(cite, template)


def read_around(path: str, needle: str, before: int = 3):
    """A step that reads ``path`` from a little above the line where ``needle`` was found."""

    def step(seen):
        line = _first_line(seen, path, needle) or 1
        return ("read_file", {"path": path, "start_line": max(1, line - before)})

    return step


@dataclass
class ScriptedRun:
    """Tool calls, one turn each, then an answer. ``failure`` says what a bad run gets wrong."""

    steps: list
    answer: str
    failure: str = ""
    label: str = field(default="scripted")

    def model(self):
        """A fresh ``complete(messages, tools)`` that plays this script."""
        return _Player(self)


class _Player:
    def __init__(self, run: ScriptedRun):
        self.run, self.calls = run, 0

    def __call__(self, messages, tools):
        self.calls += 1
        seen = seen_lines(messages)
        if self.calls <= len(self.run.steps):
            step = self.run.steps[self.calls - 1]
            name, args = step(seen) if callable(step) else step
            return turn(call(name, args, call_id=f"s{self.calls}"))
        return answer(resolve(self.run.answer, seen))


def R(*steps, answer: str, failure: str = "") -> ScriptedRun:
    return ScriptedRun(list(steps), answer, failure)


# --------------------------------------------------------------------------- fixture_repo

FIXTURE_GOOD = {
    "shop-total-bug": R(
        ("search_code", {"query": "def order_total"}),
        ("read_file", {"path": "shop/service.py"}),
        ("read_file", {"path": "shop/models.py"}),
        answer="order_total calls subtotal, which sums item.cost [[shop/service.py|item.cost]], but Item "
               "defines price and no cost attribute [[shop/models.py|price: float]]. The caller uses the "
               "wrong name: subtotal should read item.price.",
    ),
    "tax-rate": R(
        ("search_code", {"query": "TAX_RATE"}),
        ("read_file", {"path": "shop/settings.py"}),
        answer="The shop applies TAX_RATE = 0.2, a 20% tax, set in shop/settings.py "
               "[[shop/settings.py|TAX_RATE]] and applied at the end of order_total "
               "[[shop/service.py|(1 + TAX_RATE)]].",
    ),
    "member-discount": R(
        ("search_code", {"query": "MEMBER_DISCOUNT"}),
        ("read_file", {"path": "shop/service.py", "start_line": 12, "end_line": 17}),
        answer="Members get MEMBER_DISCOUNT = 0.1, a 10% discount [[shop/settings.py|MEMBER_DISCOUNT =]], "
               "applied in order_total before tax [[shop/service.py|if customer.member|MEMBER_DISCOUNT]].",
    ),
    "item-fields": R(
        ("read_file", {"path": "shop/models.py"}),
        answer="An Item has a name, a price and a quantity that defaults to 1 "
               "[[shop/models.py|name: str|quantity: int]].",
    ),
    "order-test": R(
        ("search_code", {"query": "def test_order_total"}),
        ("read_file", {"path": "tests/test_service.py"}),
        answer="test_order_total_applies_tax [[tests/test_service.py|def test_order_total_applies_tax|== 7.2]] "
               "expects three pens at 2.0 for a non-member to cost 7.2 (6.0 plus 20% tax).",
    ),
}

FIXTURE_BAD = {
    "shop-total-bug": R(
        ("search_code", {"query": "def order_total"}),
        ("read_file", {"path": "shop/service.py"}),
        ("read_file", {"path": "shop/models.py"}),
        answer="order_total fails because Item has no attribute cost: subtotal reads item.cost "
               "[[shop/service.py|item.cost]], and the Item class [[shop/models.py|class Item]] does not "
               "define it.",
        failure="right evidence, wrong answer: both files read, but the answer restates the error and "
                "never names price",
    ),
    "tax-rate": R(
        answer="The shop applies a 19% VAT, configured in shop/config.py:12.",
        failure="a guess: no tool call, a tax rate and a file that do not exist",
    ),
    "member-discount": R(
        ("read_file", {"path": "shop/discount.py"}),
        ("search_code", {"query": "MEMBER_DISCOUNT"}),
        ("search_code", {"query": "MEMBER_DISCOUNT"}),
        ("read_file", {"path": "shop/service.py", "start_line": 12, "end_line": 17}),
        answer="Members get MEMBER_DISCOUNT = 0.1, a 10% discount [[shop/settings.py|MEMBER_DISCOUNT =]], "
               "applied in order_total before tax [[shop/service.py|if customer.member|MEMBER_DISCOUNT]].",
        failure="a right answer reached by sloppy tool use: a file that does not exist, then the same "
                "search twice",
    ),
    "item-fields": R(
        ("read_file", {"path": "shop/service.py"}),
        answer="An Item has a name, a price, a quantity and a member flag (shop/models.py:17-19).",
        failure="read the wrong file, then cited lines it never saw (and invented a field)",
    ),
    "order-test": R(
        *[("list_directory", {"path": "."})] * 10,
        answer="(never reached)",
        failure="kept listing the same directory until max_steps",
    ),
}

# --------------------------------------------------------------------------- the lab's own code/

LAB_GOOD = {
    "lab-config-default": R(
        ("search_code", {"query": "def default_model"}),
        ("read_file", {"path": "config.py"}),
        answer="Without COPILOT_MODEL [[config.py|if env.get(\"COPILOT_MODEL\")]], default_model "
               "[[config.py|def default_model]] picks the model of the first provider in PROVIDER_DEFAULTS "
               "whose key is set. GROQ_API_KEY is listed first [[config.py|PROVIDER_DEFAULTS:|(\"GROQ_API_KEY\"]], "
               "so with a Groq key the copilot defaults to Groq.",
    ),
    "lab-loop-stop": R(
        ("search_code", {"query": "MAX_STEPS_REACHED ="}),
        read_around("agent_loop.py", "MAX_STEPS_REACHED =", before=6),
        answer="run_agent makes at most max_steps model calls [[agent_loop.py|def run_agent]]; the default is "
               "DEFAULT_MAX_STEPS [[agent_loop.py|DEFAULT_MAX_STEPS =]]. At the cap it returns a string that "
               "starts with MAX_STEPS_REACHED [[agent_loop.py|MAX_STEPS_REACHED =]] instead of looping on.",
    ),
    "lab-sandbox": R(
        ("search_code", {"query": "def safe_resolve"}),
        read_around("tools.py", "def safe_resolve", before=0),
        answer="Every tool goes through resolve_visible [[tools.py|def resolve_visible]], which calls "
               "safe_resolve first [[tools.py|target = safe_resolve(]]. safe_resolve [[tools.py|def safe_resolve]] "
               "resolves the path and refuses anything whose real location is outside the repository root.",
    ),
    "lab-hidden-files": R(
        ("search_code", {"query": "def is_excluded"}),
        ("read_file", {"path": "repo_files.py"}),
        answer="is_excluded [[repo_files.py|def is_excluded]] hides everything under EXCLUDED_DIRS (.git, .venv, venv, "
               "node_modules, __pycache__) [[repo_files.py|EXCLUDED_DIRS =]] and secrets: .env, .env.* and private "
               "keys [[repo_files.py|SECRET_FILE_NAMES =]].",
    ),
    "lab-grounded": R(
        ("search_code", {"query": "def check_citations"}),
        read_around("citations.py", "def check_citations", before=0),
        answer="check_citations [[citations.py|def check_citations]] checks each path:line in the answer: a "
               "visible file inside the repository, a line in range, and lines that lines_seen "
               "[[citations.py|def lines_seen]] reports as injected or shown by a tool during this run.",
    ),
}

LAB_BAD = {
    "lab-config-default": R(
        answer="It defaults to OpenAI's gpt-4o, see config.py:12.",
        failure="a guess from memory: no tool call, a real line it never saw",
    ),
    "lab-loop-stop": R(
        ("search_code", {"query": "max_steps"}),
        ("search_code", {"query": "max_steps"}),
        ("read_file", {"path": "agent_loop.py", "start_line": 5000}),
        answer="It stops after max_steps calls [[agent_loop.py|def run_agent]].",
        failure="repeats and an error, then a thin answer (one of three symbols)",
    ),
    "lab-sandbox": R(
        ("search_code", {"query": "def check_citations"}),
        read_around("citations.py", "def check_citations", before=0),
        answer="citations.py checks every path against the repository in check_citations "
               "[[citations.py|def check_citations]].",
        failure="the wrong file: a check on the answer's citations, not the tools' sandbox",
    ),
    "lab-hidden-files": R(
        *[("list_directory", {"path": "."}), ("list_directory", {"path": "harness"})] * 5,
        answer="(never reached)",
        failure="wandered between two listings until max_steps",
    ),
    "lab-grounded": R(
        ("search_code", {"query": "def check_citations"}),
        read_around("citations.py", "def check_citations", before=0),
        answer="A citation is grounded when its file exists in the repository [[citations.py|def check_citations]].",
        failure="right evidence, incomplete answer: existence only, no range or seen-in-this-run check",
    ),
}

SCRIPTED = {
    "fixture": {"good": FIXTURE_GOOD, "bad": FIXTURE_BAD},
    "lab": {"good": LAB_GOOD, "bad": LAB_BAD},
}
