"""Evaluate the copilot over a question set, one component at a time (M6).

    python evaluate.py                   fixture set: scripted good and bad runs, offline
    python evaluate.py --set lab         questions about the lab's own code/ ("what does config default to?")
    python evaluate.py --model           your real model (a key in code/.env), under a token budget
    python evaluate.py --json            one JSON document instead of the table

This is a measurement, not a test: answers vary between runs and models, so record the numbers and
compare them. Every run goes through copilot.run (context injection, your run_agent, the real
tools, citations.check_citations); offline, the model is replaced by the scripted runs in
eval/scripted_runs.py, which are labelled as such and are not model output.

Components, per question (never blended into one number):
    context   the injected context included a relevant file         (retrieval)
    read      a relevant file was read through read_file             (evidence)
    tools     valid tool use: at least one call, no errors, no identical repeats
    cited     the answer cites at least one real path:line (file exists, line in range)
    grounded  citations whose lines were injected or read in this run, of all citations
    expect    the expected citation is among them
    symbols   expected symbols named in the answer
    root      the root cause is named (for the planted defect: both `cost` and `price`)
    steps, tokens, time, ended   what the run cost and how it stopped

The lab set asks about code/ itself, and code/ holds eval/: the context selector can rank the
question file (which repeats the question word for word) above the code that answers it. That is a
real leak between a test set and the corpus it is asked about, and the `context` column shows it.

Question sets are JSONL, one object per line: id, question, relevant_files, expected_symbols,
expected_citation ("path", "path:line" or "path:start-end"), and optionally root_cause_terms.
Exit codes: 0 measured; 2 could not run (a milestone not done yet, no provider, a bad file).
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import break_and_observe as bo
import llm  # imports config only; the lab modules are imported after --reference picks them
from harness.meter import HARNESS_MAX_CALLS, HARNESS_MAX_TOKENS, HarnessCeiling, Meter, canonical
from harness.strict_provider import ProviderRejected

CODE_DIR = Path(__file__).resolve().parent
EVAL_DIR = CODE_DIR / "eval"
QUESTION_SETS = {  # name -> (question file, repository it asks about)
    "fixture": (EVAL_DIR / "fixture_questions.jsonl", CODE_DIR / "fixture_repo"),
    "lab": (EVAL_DIR / "lab_questions.jsonl", CODE_DIR),
}
SCRIPTED_RUNS = ("good", "bad")
MODEL_TOKEN_BUDGET = 200_000  # --model: stop starting new questions once this many tokens are spent
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


def matches_expected(spec: str, citations) -> bool:
    """Whether a real citation covers the expected one ("path", "path:line" or "path:a-b")."""
    path, _, lines = spec.partition(":")
    lo, _, hi = lines.partition("-")
    for c in citations:
        if c.path != path or not (c.exists and c.in_range):
            continue
        if not lines or (c.line <= int(hi or lo) and int(lo) <= c.end_line):
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
                      max_tokens: int | None = None) -> Score:
    """Run one question through copilot.run with ``model`` as ``complete`` and score it.

    Raises NotImplementedError ("M<n>: ...") when a learner function is still a stub.
    """
    copilot = copilot_module()
    meter = Meter(model, HARNESS_MAX_CALLS, max_tokens or HARNESS_MAX_TOKENS, usage)
    started = time.perf_counter()
    result, ended = None, ""
    try:
        result = copilot.run(q.question, repo, complete=meter, max_steps=max_steps, top_k=top_k,
                             use_context=use_context, cache_dir=cache_dir)
        ended = result.termination
    except llm.NotDoneYet as exc:  # copilot turns the stub's NotImplementedError into this
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


def evaluate_model(questions, repo, complete, usage, label: str, budget: int, **options) -> list[Score]:
    """Every question with a real model, until the token budget is spent."""
    scores, spent = [], 0
    for q in questions:
        if spent >= budget:
            break
        score = evaluate_question(q, repo, complete, run=label, usage=usage, max_tokens=budget - spent, **options)
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


# --------------------------------------------------------------------------- command line

def parse_args(argv):
    parser = argparse.ArgumentParser(prog="evaluate.py", description="Measure the copilot over a question set, component by component.")
    parser.add_argument("--set", choices=sorted(QUESTION_SETS), default="fixture", help="question set (default: fixture)")
    parser.add_argument("--questions", help="your own JSONL question file (use with --repo and --model)")
    parser.add_argument("--repo", help="the repository the questions are about (default: the set's)")
    parser.add_argument("--runs", default="good,bad", help="scripted runs to show offline (default: good,bad)")
    parser.add_argument("--only", help="evaluate only the question with this id")
    parser.add_argument("--model", nargs="?", const="", default=None, metavar="MODEL",
                        help="use a real model (default: the one config.py picks)")
    parser.add_argument("--api-base", help="OpenAI-compatible server for --model")
    parser.add_argument("--max-tokens", type=int, default=MODEL_TOKEN_BUDGET,
                        help=f"--model: token budget for the whole set (default {MODEL_TOKEN_BUDGET:,})")
    parser.add_argument("--max-steps", type=int, default=None, help="model calls per question (default: the loop's)")
    parser.add_argument("--top-k", type=int, default=3, help="files to inject context from (default 3)")
    parser.add_argument("--no-context", action="store_true", help="inject no context")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--reference", action="store_true", help="run the reference solution (rubric/reference/)")
    args = parser.parse_args(argv)
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    if not runs or any(r not in SCRIPTED_RUNS for r in runs):
        parser.error(f"--runs takes {', '.join(SCRIPTED_RUNS)} (comma-separated)")
    if (args.max_steps is not None and args.max_steps < 1) or args.top_k < 0 or args.max_tokens < 1:
        parser.error("--max-steps and --max-tokens must be 1 or more, --top-k 0 or more")
    args.runs = runs
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    impl_label = bo.use_implementation("reference" if args.reference else None)
    path, repo = QUESTION_SETS[args.set]
    path = Path(args.questions) if args.questions else path
    repo = Path(args.repo) if args.repo else repo
    set_name = Path(args.questions).stem if args.questions else args.set
    options = {"max_steps": args.max_steps, "top_k": args.top_k, "use_context": not args.no_context}
    try:
        if not repo.is_dir():
            raise QuestionSetError(f"--repo {str(repo)!r} is not a directory")
        questions = load_questions(path)
        if args.only:
            questions = [q for q in questions if q.id == args.only]
            if not questions:
                raise QuestionSetError(f"no question with id {args.only!r} in {path}")
        if args.model is not None:
            complete, usage, model_label = bo.real_model(args.model or None, args.api_base)
            runs = {"model": evaluate_model(questions, repo, complete, usage, "model", args.max_tokens, **options)}
        else:
            if args.questions:
                raise QuestionSetError("your own question file has no scripted runs: add --model")
            model_label = "scripted runs, NOT model output (eval/scripted_runs.py)"
            runs = {f"scripted {r}": evaluate_scripted(questions, repo, set_name, r, **options) for r in args.runs}
    except NotImplementedError as exc:
        milestone, _, detail = str(exc).partition(":")
        print(f"{milestone.strip()} is not done yet: {detail.strip().rstrip('.')}. evaluate.py runs your "
              "copilot, so finish M1-M5 first (python -m pytest shows where you are), or add --reference.",
              file=sys.stderr)
        return 2
    except QuestionSetError as exc:
        print(f"evaluate: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # no provider, authentication, unreachable server: one line, no traceback
        print(f"evaluate: {llm.describe_error(exc)}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({
            "set": set_name, "repo": str(repo), "model": model_label, "implementation": impl_label,
            "runs": {name: {"aggregate": aggregate(scores), "questions": [asdict(s) for s in scores]}
                     for name, scores in runs.items()},
        }, indent=1, ensure_ascii=False))
    else:
        shown = repo.resolve().relative_to(CODE_DIR.parent) if repo.resolve().is_relative_to(CODE_DIR.parent) else repo
        print(render_report(set_name, shown, impl_label, runs, model_label))
    return 0


if __name__ == "__main__":
    sys.exit(main())
