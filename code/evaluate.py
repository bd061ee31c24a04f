"""Evaluate the copilot over a question set, one component at a time (M6).

    python evaluate.py                   fixture set: scripted good and bad runs, offline
    python evaluate.py --set lab         questions about the lab's own code/ ("what does config default to?")
    python evaluate.py --model           your real model (a key in code/.env), under a token budget
    python evaluate.py --json            one JSON document instead of the table

This is a measurement, not a test: answers vary between runs and models, so record the numbers and
compare them. Every run goes through copilot.run (context injection, your run_agent, the real
tools, citations.check_citations); offline, the model is replaced by the scripted runs in
eval/scripted_runs.py, which are labelled as such and are not model output. This file holds the
question sets and the command line; loading, running, scoring and the table are in
harness/evaluation.py.

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

The lab set asks about code/ itself, and code/ holds eval/: the question file repeats each question
word for word, and the scripted runs hold invented answers. That would be a leak between a test set
and the corpus it is asked about, so copilot.run never injects the lab's own test data
(context_selector.lab_data); the model can still read it through the tools.

Question sets are JSONL, one object per line: id, question, relevant_files, expected_symbols,
expected_citation ("path", "path:line" or "path:start-end"), and optionally root_cause_terms.
Exit codes: 0 measured; 2 could not run (a milestone not done yet, no provider, a bad file).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import cli
import llm  # imports config only; the lab modules are imported after --reference picks them
from harness.evaluation import (QuestionSetError, aggregate, evaluate_model, evaluate_scripted,
                                load_questions, render_report)
from harness.lab import real_model, use_implementation

CODE_DIR = Path(__file__).resolve().parent
EVAL_DIR = CODE_DIR / "eval"
QUESTION_SETS = {  # name -> (question file, repository it asks about)
    "fixture": (EVAL_DIR / "fixture_questions.jsonl", CODE_DIR / "fixture_repo"),
    "lab": (EVAL_DIR / "lab_questions.jsonl", CODE_DIR),
}
SCRIPTED_RUNS = ("good", "bad")
MODEL_TOKEN_BUDGET = 200_000  # --model: stop starting new questions once this many tokens are spent


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
    impl_label = use_implementation("reference" if args.reference else None)
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
            complete, usage, model_label = real_model(args.model or None, args.api_base)
            runs = {"model": evaluate_model(questions, repo, complete, usage, "model", args.max_tokens, **options)}
        else:
            if args.questions:
                raise QuestionSetError("your own question file has no scripted runs: add --model")
            model_label = "scripted runs, NOT model output (eval/scripted_runs.py)"
            runs = {f"scripted {r}": evaluate_scripted(questions, repo, set_name, r, **options) for r in args.runs}
    except NotImplementedError as exc:
        milestone, _, detail = cli.first_not_done(str(exc)).partition(":")
        print(f"{milestone.strip()} is not done yet: {detail.strip().rstrip('.')}. evaluate.py runs your "
              "copilot, so finish M1-M5 first (python -m pytest shows where you are), or add --reference.",
              file=sys.stderr)
        return 2
    except QuestionSetError as exc:
        print(f"evaluate: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # no provider, authentication, unreachable server: one line, no traceback
        offline = "without --model, evaluate.py needs no provider: it scores the scripted runs"
        print(f"evaluate: {llm.describe_error(exc, offline=offline)}", file=sys.stderr)
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
    sys.exit(cli.run_main(main))
