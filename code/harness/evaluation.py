"""The machinery of evaluate.py (M6): load a question set, run each question through copilot.run,
score every component separately, and render the table.

Components, per question and run (never blended into one number): ``score_run`` says exactly how
each is measured; ``aggregate`` counts them over a run; ``render_report`` prints both.
"""

from __future__ import annotations

import importlib
import json
import re
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import cli
import harness.meter as meter_module
from harness.meter import HARNESS_MAX_CALLS, HARNESS_MAX_TOKENS, HarnessCeiling, Meter, canonical
from harness.strict_provider import ProviderRejected

# The case study's weights (FAILURE_ANALYSIS.md, "A measured case"), shown only beside the components
# they blend, for root-cause questions only.
CASE_STUDY_WEIGHTS = (("suspected_file", 0.25), ("evidence_read", 0.20), ("valid_tool_use", 0.15), ("root_cause", 0.40))


class QuestionSetError(ValueError):
    """A question file that cannot be used; the message names the line."""


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    relevant_files: tuple[str, ...]
    expected_symbols: tuple[str, ...]
    expected_citation: str
    root_cause_terms: tuple[str, ...] = ()


def load_questions(path) -> list[Question]:
    """Read a JSONL question set; a clear QuestionSetError for anything malformed."""
    questions = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise QuestionSetError(f"cannot read {path}: {exc.strerror}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            questions.append(Question(
                id=str(data["id"]), question=str(data["question"]),
                relevant_files=tuple(data["relevant_files"]), expected_symbols=tuple(data["expected_symbols"]),
                expected_citation=str(data["expected_citation"]),
                root_cause_terms=tuple(data.get("root_cause_terms") or ()),
            ))
        except (ValueError, KeyError, TypeError) as exc:
            raise QuestionSetError(f"{path}, line {number}: {type(exc).__name__}: {exc} (needs id, question, "
                                   "relevant_files, expected_symbols, expected_citation)") from None
    if not questions:
        raise QuestionSetError(f"{path} holds no questions")
    return questions


# --------------------------------------------------------------------------- scoring one run

@dataclass
class Score:
    """One question, one run: every component separately, plus what the run cost."""

    id: str
    run: str
    context_hit: bool
    context_files: list
    evidence_read: bool
    files_read: list
    tool_calls: int
    tool_errors: int
    repeats: int
    valid_tool_use: bool
    citations: int
    cited_real: bool
    grounded: int
    expected_citation: bool
    symbols_found: list
    symbols_expected: list
    root_cause: bool | None      # None: the question has no root-cause terms
    steps: int
    tokens_in: int
    tokens_out: int
    tokens_estimated: bool
    wall_seconds: float
    ended: str
    answer: str
    failure_note: str = ""       # scripted bad runs: what they get wrong on purpose
    blended_case_study: float | None = None
    ungrounded: list = field(default_factory=list)


def mentions(text: str, term: str) -> bool:
    """``term`` appears in ``text`` as a whole word (case-insensitive): 'cost' is not in 'costume'."""
    return re.search(rf"(?<![\w]){re.escape(term)}(?![\w])", text or "", re.IGNORECASE) is not None


def files_read(messages) -> list[str]:
    """Paths that read_file really returned (error results do not count)."""
    import citations  # after use_implementation: it imports tools

    paths = set()
    for message in messages:
        content = str(message.get("content") or "")
        if message.get("role") == "tool" and not content.startswith("Error:"):
            paths.update(m[0] for m in citations.READ_HEADER.findall(content))
    return sorted(paths)


def _line(digits: str) -> int:
    """A line number from a question file; past 9 digits it is past any file (int() refuses 4,301)."""
    return int(digits) if len(digits) <= 9 else 10**9


def matches_expected(spec: str, citations) -> bool:
    """Whether a real citation covers the expected one ("path", "path:line" or "path:a-b")."""
    path, _, lines = spec.partition(":")
    lo, _, hi = lines.partition("-")
    for c in citations:
        if c.path != path or not (c.exists and c.in_range):
            continue
        if not lines or (c.line <= _line(hi or lo) and _line(lo) <= c.end_line):
            return True
    return False


def score_run(q: Question, run: str, result, meter, ended: str, wall: float, failure="") -> Score:
    messages = result.messages if result else []
    answered = result is not None and result.termination == "answered"
    answer = result.answer if answered else ""
    citations = result.citations if answered else []
    import report  # after use_implementation: it imports agent_loop and stretch

    calls = report.tool_calls_of(messages)
    signatures = [(c["name"], canonical(c["arguments"])) for c in calls]
    errors = sum(1 for c in calls if c["error"])
    repeats = len(signatures) - len(set(signatures))
    read = files_read(messages)
    context = sorted({s.path for s in (result.snippets if result else [])})
    score = Score(
        id=q.id, run=run,
        context_hit=bool(set(context) & set(q.relevant_files)), context_files=context,
        evidence_read=bool(set(read) & set(q.relevant_files)), files_read=read,
        tool_calls=len(calls), tool_errors=errors, repeats=repeats,
        valid_tool_use=bool(calls) and errors == 0 and repeats == 0,
        citations=len(citations), cited_real=any(c.exists and c.in_range for c in citations),
        grounded=sum(1 for c in citations if c.grounded),
        expected_citation=matches_expected(q.expected_citation, citations),
        symbols_found=[s for s in q.expected_symbols if mentions(answer, s)], symbols_expected=list(q.expected_symbols),
        root_cause=all(mentions(answer, t) for t in q.root_cause_terms) if q.root_cause_terms else None,
        steps=meter.calls, tokens_in=meter.tokens_in, tokens_out=meter.tokens_out,
        tokens_estimated=meter.usage is None, wall_seconds=round(wall, 3), ended=ended,
        answer=answer[:400], failure_note=failure,
        ungrounded=[f"{c.path}:{c.line}: {c.reason}" for c in citations if not c.grounded],
    )
    if q.root_cause_terms:
        suspected = any(c.path in q.relevant_files for c in citations) or any(f in answer for f in q.relevant_files)
        parts = {"suspected_file": suspected, "evidence_read": score.evidence_read,
                 "valid_tool_use": score.valid_tool_use, "root_cause": score.root_cause}
        score.blended_case_study = round(sum(w for name, w in CASE_STUDY_WEIGHTS if parts[name]), 2)
    return score


# --------------------------------------------------------------------------- running

def copilot_module():
    """copilot.py, imported from the implementation already on sys.path (see --reference)."""
    return importlib.import_module("copilot")


def evaluate_question(q: Question, repo, model, *, run: str, usage=None, failure: str = "",
                      max_steps=None, top_k: int = 3, use_context: bool = True, cache_dir=None,
                      max_tokens: int | None = None, max_seconds: float | None = None) -> Score:
    """Run one question through copilot.run with ``model`` as ``complete`` and score it.

    ``max_seconds`` replaces the harness's wall-clock ceiling (meter.HARNESS_MAX_SECONDS) for a real
    model (model_ceiling).

    Raises NotImplementedError ("M<n>: ...") when a learner function is still a stub.
    """
    copilot = copilot_module()
    meter = Meter(model, HARNESS_MAX_CALLS, max_tokens or HARNESS_MAX_TOKENS, usage)
    if max_seconds is not None:
        meter.check_clock = partial(_check_clock, meter, max_seconds)  # the model's budget, not the harness's
    started = time.perf_counter()
    result, ended = None, ""
    try:
        result = copilot.run(q.question, repo, complete=meter, max_steps=max_steps, top_k=top_k,
                             use_context=use_context, cache_dir=cache_dir)
        ended = result.termination
    except cli.NotDoneYet as exc:  # copilot turns the stub's NotImplementedError into this
        raise NotImplementedError(str(exc)) from None
    except HarnessCeiling as stop:
        ended = f"harness ceiling ({stop})"
    except ProviderRejected as exc:
        ended = f"provider rejected: {str(exc)[:120]}"
    except Exception as exc:
        if usage is not None and _is_provider_error(exc):
            raise  # a real provider failed: the caller prints one line and stops
        ended = f"crashed: {type(exc).__name__}: {str(exc)[:120]}"
    return score_run(q, run, result, meter, ended, time.perf_counter() - started, failure)


def _is_provider_error(exc) -> bool:
    return any(cls.__module__.startswith(("litellm", "openai", "httpx")) for cls in type(exc).__mro__)


def evaluate_scripted(questions, repo, set_name: str, run: str, **options) -> list[Score]:
    """Every question with its scripted ``run`` ("good" or "bad") from eval/scripted_runs.py."""
    scripts = importlib.import_module("eval.scripted_runs").SCRIPTED.get(set_name, {}).get(run, {})
    scores = []
    for q in questions:
        script = scripts.get(q.id)
        if script is None:
            raise QuestionSetError(f"no scripted {run} run for question {q.id!r} in eval/scripted_runs.py; "
                                   "use --model for your own questions")
        scores.append(evaluate_question(q, repo, script.model(), run=f"scripted {run}",
                                        failure=script.failure, **options))
    return scores


def _check_clock(meter, max_seconds: float) -> None:
    if time.perf_counter() - meter.started > max_seconds:
        meter.stopped = f"harness ceiling: {max_seconds:g} s of wall time"
        raise HarnessCeiling(meter.stopped)


def model_ceiling(complete, max_steps=None) -> float:
    """Seconds one question may take with a real model: its own budget per call (``complete.timeout``,
    llm.request_timeout: 60 s for a hosted provider, ten times that for a local server) for each model
    call the loop may make, and never less than the harness's HARNESS_MAX_SECONDS."""
    per_call = getattr(complete, "timeout", None)
    floor = meter_module.HARNESS_MAX_SECONDS
    if not isinstance(per_call, (int, float)) or per_call <= 0:
        return float(floor)
    steps = max_steps or importlib.import_module("agent_loop").DEFAULT_MAX_STEPS
    return float(max(floor, per_call * steps))


def evaluate_model(questions, repo, complete, usage, label: str, budget: int, **options) -> list[Score]:
    """Every question with a real model, until the token budget is spent; each question's wall-clock
    ceiling is the model's own budget (model_ceiling), so a slow local model is not cut at 60 s."""
    scores, spent = [], 0
    ceiling = model_ceiling(complete, options.get("max_steps"))
    for q in questions:
        if spent >= budget:
            break
        score = evaluate_question(q, repo, complete, run=label, usage=usage, max_tokens=budget - spent,
                                  max_seconds=ceiling, **options)
        spent += score.tokens_in + score.tokens_out
        scores.append(score)
    return scores


# --------------------------------------------------------------------------- reporting

def aggregate(scores) -> dict:
    """Each component counted over the questions of one run; never blended."""
    n = len(scores)
    rooted = [s for s in scores if s.root_cause is not None]
    return {
        "questions": n,
        "context_hit": sum(s.context_hit for s in scores),
        "evidence_read": sum(s.evidence_read for s in scores),
        "valid_tool_use": sum(s.valid_tool_use for s in scores),
        "cited_real": sum(s.cited_real for s in scores),
        "grounded": sum(s.grounded for s in scores), "citations": sum(s.citations for s in scores),
        "expected_citation": sum(s.expected_citation for s in scores),
        "symbols_found": sum(len(s.symbols_found) for s in scores),
        "symbols_expected": sum(len(s.symbols_expected) for s in scores),
        "root_cause": sum(bool(s.root_cause) for s in rooted), "root_cause_questions": len(rooted),
        "steps": sum(s.steps for s in scores), "tool_calls": sum(s.tool_calls for s in scores),
        "tokens_in": sum(s.tokens_in for s in scores), "tokens_out": sum(s.tokens_out for s in scores),
        "wall_seconds": round(sum(s.wall_seconds for s in scores), 3),
        "answered": sum(s.ended == "answered" for s in scores),
    }


def _yes(value) -> str:
    return "-" if value is None else ("yes" if value else "NO")


COLUMNS = ("run", "question", "context", "read", "tools", "cited", "grounded", "expect", "symbols",
           "root", "steps", "tokens", "time", "ended")


def table_rows(scores) -> list[tuple]:
    rows = []
    for s in scores:
        tools = "yes" if s.valid_tool_use else ("NO (none)" if not s.tool_calls else
                                                 f"NO ({s.tool_errors} err, {s.repeats} rep)")
        rows.append((s.run.replace("scripted ", ""), s.id, _yes(s.context_hit), _yes(s.evidence_read), tools,
                     _yes(s.cited_real), f"{s.grounded}/{s.citations}", _yes(s.expected_citation),
                     f"{len(s.symbols_found)}/{len(s.symbols_expected)}", _yes(s.root_cause), str(s.steps),
                     f"{s.tokens_in + s.tokens_out:,}", f"{s.wall_seconds:.2f}s", s.ended.split(":")[0]))
    return rows


def render_table(rows, columns=COLUMNS) -> str:
    widths = [max(len(str(r[i])) for r in [columns, *rows]) for i in range(len(columns))]
    line = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(columns), line(["-" * w for w in widths]), *map(line, rows)])


def render_aggregates(runs: dict) -> str:
    """One column per run, one row per component."""
    names = list(runs)
    aggs = {name: aggregate(scores) for name, scores in runs.items()}

    def frac(a, key, total_key="questions"):
        return f"{a[key]}/{a[total_key]}"

    rows = [
        ("context hit", [frac(a, "context_hit") for a in aggs.values()]),
        ("evidence read", [frac(a, "evidence_read") for a in aggs.values()]),
        ("valid tool use", [frac(a, "valid_tool_use") for a in aggs.values()]),
        ("cited a real path:line", [frac(a, "cited_real") for a in aggs.values()]),
        ("citations grounded", [frac(a, "grounded", "citations") for a in aggs.values()]),
        ("expected citation", [frac(a, "expected_citation") for a in aggs.values()]),
        ("expected symbols", [frac(a, "symbols_found", "symbols_expected") for a in aggs.values()]),
        ("root cause named", [frac(a, "root_cause", "root_cause_questions") for a in aggs.values()]),
        ("answered", [frac(a, "answered") for a in aggs.values()]),
        ("steps (model calls)", [str(a["steps"]) for a in aggs.values()]),
        ("tool calls", [str(a["tool_calls"]) for a in aggs.values()]),
        ("tokens in / out", [f"{a['tokens_in']:,} / {a['tokens_out']:,}" for a in aggs.values()]),
        ("wall time", [f"{a['wall_seconds']:.2f}s" for a in aggs.values()]),
    ]
    return render_table([(label, *values) for label, values in rows], ("component", *names))


def render_report(set_name, repo, impl_label, runs: dict, model_label: str) -> str:
    scores = [s for run in runs.values() for s in run]
    estimated = any(s.tokens_estimated for s in scores)
    out = [
        f"evaluate.py: {set_name} set, {len({s.id for s in scores})} questions, repository {repo}",
        f"model: {model_label} | implementation: {impl_label}"
        + (" | tokens estimated (4 characters per token)" if estimated else ""),
        "",
        render_table(table_rows(scores)),
        "",
        render_aggregates(runs),
    ]
    blended = [s for s in scores if s.blended_case_study is not None]
    if blended:
        out += ["", "Blended with the case study's weights from FAILURE_ANALYSIS.md (file 0.25, evidence 0.20, tools 0.15, root cause 0.40), "
                "shown only beside the components it hides:"]
        out += [f"  {s.run} {s.id}: {s.blended_case_study:.2f}" for s in blended]
    notes = [s for s in scores if s.failure_note or s.ungrounded]
    if notes:
        out += ["", "Notes:"]
        for s in notes:
            if s.failure_note:
                out.append(f"  {s.run} {s.id}: fails on purpose: {s.failure_note}")
            for item in s.ungrounded:
                out.append(f"  {s.run} {s.id}: ungrounded citation {item}")
    return "\n".join(out)

