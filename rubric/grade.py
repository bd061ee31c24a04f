"""Instructor autograder: a learner's repository in, rubric evidence and SUGGESTED points out.

    python rubric/grade.py PATH                            one learner: report on stdout
    python rubric/grade.py PATH --out reports/             ... also PATH.md and PATH.json there
    python rubric/grade.py SUBMISSIONS_DIR --csv grades.csv  one sub-folder per learner
    python rubric/grade.py SUBMISSIONS_DIR --csv grades.csv --jobs 1   one at a time (default: one per CPU)
    python rubric/grade.py --finalize grades.csv --out reports/      your decisions in: final grades, feedback

Folder mode also writes the class overview (OUT/class.html, or --html PATH) and, with --feedback DIR,
a draft feedback file per learner; --finalize reads the CSV you edited (a level per criterion, HOLD
replaced by your decision), checks it, and writes the final grades CSV and each learner's feedback.

Never modifies a submission (it grades a copy), needs no key and no network, and runs learner
code only in a sandbox (bubblewrap on Linux by default; --sandbox docker; see "The sandbox" in
rubric/rubric.md), with a timeout and memory and process ceilings; without one it refuses to run
learner code unless --no-sandbox is given. It runs the lab's own tests
(pristine, from this repository) on the learner's functions, an instructor sandbox battery,
break_and_observe.py and evaluate.py, then reads UNDERSTANDING.md and FAILURE_ANALYSIS.md.
Levels are suggestions with their reasons; the instructor decides (see rubric/rubric.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from grading import classview, decisions, feedback, grader, peers, report, runner, similarity  # noqa: E402
from grading.safe_text import file_stem, terminal  # noqa: E402

# Before anything else, and before any child: no key stays in this process for learner code to find.
runner.drop_own_secrets()


def is_submission(path: Path) -> bool:
    """A lab root, or a folder wrapping one (an unpacked zip often adds a level)."""
    if (path / "code").is_dir() or (path / "UNDERSTANDING.md").is_file() or (path / "FAILURE_ANALYSIS.md").is_file():
        return True
    try:
        children = [c for c in path.iterdir() if c.is_dir() and not c.name.startswith((".", "__"))]
    except OSError:
        return False
    return len(children) == 1 and (children[0] / "code" / "tools.py").is_file()


def parse_args(argv):
    p = argparse.ArgumentParser(prog="grade.py", description="Collect rubric evidence for one learner or a folder of them.")
    p.add_argument("path", type=Path, nargs="?", help="a learner's repository, or a folder with one sub-folder per learner")
    p.add_argument("--csv", type=Path, help="folder mode: write one row per learner here")
    p.add_argument("--out", type=Path, help="write LEARNER.md and LEARNER.json here (folder mode default: ./grading-reports)")
    p.add_argument("--json", action="store_true", help="one learner: print the JSON instead of the Markdown")
    p.add_argument("--no-stretch", action="store_true", help="skip the stretch milestones' tests (about 1.5 s faster)")
    p.add_argument("--memory-mb", type=int, default=runner.DEFAULT_MEMORY_MB, help="memory ceiling for learner code (POSIX)")
    p.add_argument("--quick", action="store_true", help="run only the M1-M4 tests (criterion 1 then lacks M5/M6)")
    p.add_argument("--test-seconds", type=float, default=60.0, help="time limit per test (POSIX; 2 s after a first timeout)")
    p.add_argument("--as-submitted", action="store_true", help="run the learner's whole tools.py/agent_loop.py/stretch.py "
                   "(default: their functions spliced into this lab's provided code)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="folder mode: learners graded at once (default: one per CPU, here %(default)s)")
    p.add_argument("--keep", action="store_true", help="keep the temporary work folder (for debugging the grader)")
    p.add_argument("--html", type=Path, help="write the class overview page here (folder mode default: OUT/class.html)")
    p.add_argument("--feedback", type=Path, metavar="DIR", help="write each learner's feedback file (LEARNER.md) here "
                   "(--finalize default: OUT/feedback)")
    p.add_argument("--finalize", type=Path, metavar="EDITED_CSV", help="the grades CSV with your decisions: check it, "
                   "then write final grades (--csv, default EDITED-final.csv) and feedback, from the reports in --out")
    p.add_argument("--sandbox", choices=("auto", "bubblewrap", "docker", "podman", "user"), default="auto",
                   help="where learner code runs (default: bubblewrap on Linux; docker/podman need "
                        "GRADE_DOCKER_IMAGE, default debian:bookworm-slim, pulled beforehand; user: as root, "
                        "learner code runs as the unprivileged GRADE_SANDBOX_USER, one learner at a time)")
    p.add_argument("--no-sandbox", action="store_true", help="run learner code with YOUR privileges (your files, "
                   "your network, your processes); only for code you trust, or inside a VM or container")
    args = p.parse_args(argv)
    if args.finalize:
        if args.path:
            p.error("--finalize takes no PATH: it reads the reports in --out")
        if not args.finalize.is_file():
            p.error(f"{terminal(args.finalize)} is not a file")
        return args
    if args.path is None:
        p.error("PATH is required (or --finalize EDITED_CSV)")
    if not args.path.is_dir():
        p.error(f"{terminal(args.path)} is not a folder")
    return args


def sandbox_of(args) -> str:
    return "none" if args.no_sandbox else args.sandbox


def grade_one(path: Path, args, out: Path | None) -> dict:
    try:
        result = grader.grade(path, stretch=not args.no_stretch, memory_mb=args.memory_mb,
                              test_seconds=args.test_seconds, keep=args.keep, quick=args.quick,
                              as_submitted=args.as_submitted, sandbox=sandbox_of(args))
    except grader.NoSandbox:
        raise
    except Exception as exc:  # noqa: BLE001  (one submission that defeats the grader costs only its own row)
        result = grader.could_not_grade(path, f"could not grade: {type(exc).__name__}: {str(exc)[:300]}")
    write_reports(result, args, out)
    return result


def write_reports(result: dict, args, out: Path | None) -> None:
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        md, js = out / f"{file_stem(result['learner'])}.md", out / f"{file_stem(result['learner'])}.json"
        result["report_path"] = str(md)
        md.write_text(report.markdown(result), encoding="utf-8")
        js.write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    if args.feedback:
        args.feedback.mkdir(parents=True, exist_ok=True)
        (args.feedback / f"{file_stem(result['learner'])}.md").write_text(feedback.render(result), encoding="utf-8")


def write_class_page(results: list, path: Path, reports: Path, pairs=()) -> None:
    """The overview, linking to the reports in ``reports`` relative to where the page is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rel = Path(os.path.relpath(reports.resolve(), path.parent.resolve())).as_posix()
    path.write_text(classview.render(results, pairs, "" if rel == "." else rel + "/"), encoding="utf-8")


def finalize(args) -> int:
    out = args.out or Path("grading-reports")
    final = args.csv or args.finalize.with_name(args.finalize.stem + "-final.csv")
    before = final.stat().st_mtime_ns if final.is_file() else None
    errors = decisions.finalize(args.finalize, out, final, args.feedback or out / "feedback")
    for line in errors:
        print(f"grade.py --finalize: {terminal(line)}", file=sys.stderr)
    if final.is_file() and final.stat().st_mtime_ns != before:   # one bad row refuses that row, not the class
        print(f"grade.py: final grades in {final}; feedback in {args.feedback or out / 'feedback'}/"
              + (f" (without the {len(errors)} problem(s) above: fix those rows and run --finalize again)" if errors else ""),
              file=sys.stderr)
    return 2 if errors else 0


def own_cpu() -> float | None:
    """CPU seconds of this process so far, all threads (learner commands run in children: not in it)."""
    try:
        import resource
    except ImportError:   # Windows
        return None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return round(usage.ru_utime + usage.ru_stime, 1)


def _stop(*_):
    """SIGTERM: every learner command ends now (not when its thread next looks), then exit."""
    runner.end_all()
    sys.exit(143)


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # A kill of the grader becomes SystemExit, so the learner processes it started are killed too.
    signal.signal(signal.SIGTERM, _stop)
    if args.finalize:
        return finalize(args)
    kind, why = grader.choose_sandbox(sandbox_of(args))
    if not kind:
        print(f"grade.py: refusing to run learner code: {why}; {grader.sandbox_mod.HOW_TO_GET_ONE}", file=sys.stderr)
        return 2
    if is_submission(args.path) and not args.csv:
        result = grade_one(args.path, args, args.out)
        if args.html:
            write_class_page([result], args.html, args.out or args.html.parent)
        print(json.dumps(result, indent=1, default=str) if args.json else terminal(report.markdown(result)))
        return 0
    learners = sorted(p for p in args.path.iterdir() if p.is_dir() and not p.is_symlink() and is_submission(p))
    if not learners:
        print(f"grade.py: no submissions in {terminal(args.path)} (a submission has code/ or UNDERSTANDING.md)",
              file=sys.stderr)
        return 2
    out = args.out or Path("grading-reports")
    results: dict[Path, dict] = {}
    if kind == "user":   # every process of that user is killed after each command: one learner at a time
        args.jobs = 1
    # Each learner is graded in child processes, so a few at once use the CPUs the machine has.
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        running = {pool.submit(grade_one, learner, args, out): learner for learner in learners}
        for done, future in enumerate(as_completed(running), 1):
            learner = running[future]
            try:
                result = results[learner] = future.result()
            except Exception as exc:  # noqa: BLE001  one broken submission must not cost the others their grades
                result = results[learner] = grader.could_not_grade(learner, f"could not grade: {type(exc).__name__}: {exc}")
            if result.get("could_not_grade"):
                print(terminal(f"[{done}/{len(learners)}] {learner.name}: {result['could_not_grade']}"), file=sys.stderr,
                      flush=True)
                continue
            flags = report.flags(result)
            print(terminal(f"[{done}/{len(learners)}] {learner.name}: {result['total']}/{result['max_total']} suggested, "
                           f"{result['seconds']} s" + (f", flags: {'; '.join(flags)}" if flags else "")),
                  file=sys.stderr, flush=True)
    graded = [results[learner] for learner in learners if learner in results]  # in name order
    page = args.html or out / "class.html"
    pairs = similarity.similar_pairs(learners)
    # learners who share what the reference and the hints do not explain: both held, reports rewritten
    by_name = {learner.name: results[learner] for learner in learners if learner in results}
    try:
        shared = peers.peer_pairs(learners, {n: peers.failure_signature(r) for n, r in by_name.items()
                                             if not r.get("could_not_grade")})
        for name in peers.hold_peers(by_name, shared):
            write_reports(by_name[name], args, out)
    except Exception as exc:  # noqa: BLE001  the class's grades stand without the comparison
        shared = []
        print(terminal(f"grade.py: learners not compared with each other: {type(exc).__name__}: {exc}"[:300]),
              file=sys.stderr)
    pairs = shared + pairs
    out.mkdir(parents=True, exist_ok=True)
    (out / "class.json").write_text(json.dumps({"similar_pairs": pairs, "grader_cpu_seconds": own_cpu()}, indent=1),
                                    encoding="utf-8")
    write_class_page(graded, page, out, pairs)
    if args.csv:
        decisions.write_csv(graded, args.csv)
        print(f"grade.py: {len(graded)} rows written to {args.csv}; reports in {out}/, class page {page}", file=sys.stderr)
    failed = [learner for learner in learners if results.get(learner, {}).get("could_not_grade")]
    return 0 if len(graded) == len(learners) and not failed else 1   # every row written; 1 says some could not be graded


if __name__ == "__main__":
    sys.exit(main())
