"""The Markdown report: a ten-line summary first, then each criterion's reasons, short.

Details (every test, probe, signal and excerpt) stay in the JSON beside it and in the class page
(classview.py). Every piece of learner text goes through safe_text, so a folder name or an excerpt
cannot add a line, a link, an HTML comment or a terminal escape to the report.

Also the accessors the other renderers share (marks, reasons with their rule, confidence, flags),
written with defaults so a result from before or after a change of the judgment still renders.
"""

from __future__ import annotations

from grading.board import milestones
from grading.safe_text import md, md_code

SHORT = {1: "implementation", 2: "loop", 3: "sandbox", 4: "understanding", 5: "failure_analysis",
         6: "evaluation", 7: "starcallos"}
MARKS = ("HOLD", "READ")
FLAG_WORDS = {"tests_or_harness_edited": "tests or harness edited", "provided_code_changed": "provided code changed",
              "matches_reference_solution": "matches the reference solution", "stubs_still_raising": "stubs still raising",
              "timeouts": "tests timed out", "does_not_import": "does not import",
              "shares_work_with": "shares unusual work with"}
NO_SANDBOX = "learner code ran with the instructor's privileges (--no-sandbox)"
NO_SANDBOX_LINE = ("**Ran without a sandbox (--no-sandbox): the submission's code ran with the instructor's privileges "
                   "(files, network, processes); its evidence is only as trustworthy as the code.**")
BAD_OUTCOMES = ("failed", "timeout")
KEEP = ("called:", "expected:", "got:")


def code(text) -> str:
    """Kept for the evidence lines grader.py builds: an inline code span that cannot break out."""
    return md_code(text, limit=2000)


# --------------------------------------------------------------------------- shared accessors

def mark(c: dict) -> str:
    m = str(c.get("mark") or ("HOLD" if c.get("level") == "HOLD" else "")).upper()
    return m if m in MARKS else ""


def confidence(c: dict) -> str:
    value = c.get("confidence")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{round(value * 100)} %" if value <= 1 else f"{value:g} %"
    return str(value) if value else ""


def rule_reasons(c: dict) -> list:
    """(rule, text) per reason: a reason may carry its own rule, else the criterion's rule decided."""
    default = str(c.get("rule") or f"C{c['number']} level table")
    out = []
    for reason in c.get("reasons", []):
        if isinstance(reason, dict):
            out.append((str(reason.get("rule") or default), str(reason.get("text", reason.get("reason", "")))))
        else:
            out.append((default, str(reason)))
    return out


def quotes(c: dict) -> list:
    return [q if isinstance(q, str) else str(q.get("text", q)) for q in (c.get("quotes") or [])]


def flag_items(r: dict) -> list:
    """(short label, detail) per thing an instructor must see first; escape both where they are shown."""
    out = [("no sandbox", NO_SANDBOX)] if r.get("sandbox") == "none" else []
    held = [f"C{c['number']}" for c in r["criteria"] if mark(c) == "HOLD"]
    if held:
        out.append((f"HOLD {', '.join(held)}", "talk to the learner first"))
    for name, value in r.get("integrity", {}).get("flags", {}).items():
        if value:
            words = FLAG_WORDS.get(name, name.replace("_", " "))
            if isinstance(value, list):
                out.append((f"{words} ({len(value)})", ", ".join(map(str, value[:6])) + (" ..." if len(value) > 6 else "")))
            else:
                out.append((words, "" if value is True else str(value)))
    if r.get("could_not_grade") or r.get("error"):
        out.append(("could not grade", str(r.get("could_not_grade") or r["error"])))
    return out


def flags(r: dict) -> list:
    """Each flag as one plain string: label and detail."""
    return [f"{label}: {detail}" if detail else label for label, detail in flag_items(r)]


def failures(r: dict, milestone: str | None = None, limit: int = 3) -> list:
    """Failed tests that are not stubs: (test id, [called/expected/got lines or the first line])."""
    out = []
    for t in r.get("tests", []):
        if t.get("outcome") not in BAD_OUTCOMES or t.get("not_done") or milestone and t.get("milestone") != milestone:
            continue
        lines = [x.strip() for x in str(t.get("message", "")).splitlines() if x.strip().startswith(KEEP)]
        first = str(t.get("message", "")).strip().splitlines()[:1]
        out.append((t.get("nodeid", "?"), lines or first or [t["outcome"]]))
        if len(out) >= limit:
            break
    return out


def broken_probes(r: dict, limit: int = 3) -> list:
    """(class, probe) for the battery probes that did not hold."""
    out = []
    for name, info in r.get("battery", {}).items():
        ok = ("inside", "skipped") if name == "legal" else ("refused", "inside", "answered", "skipped")
        if info.get("status") in ("not started",):
            continue
        out += [(name, p) for p in info.get("probes", []) if p.get("result") not in ok][:limit]
    return out[:limit * 3]


def differing_evidence(r: dict) -> list:
    """(break, field, pasted, fresh) where the learner's pasted block disagrees with a fresh run."""
    breaks = r.get("failure_analysis", {}).get("breaks", {})
    return [(name, row[0], row[1], row[2]) for name, b in breaks.items() for row in b.get("comparison", [])
            if len(row) > 3 and not row[3]]


# --------------------------------------------------------------------------- the Markdown report

def summary(r: dict) -> list:
    """The first lines of the report: flags first, then one row per criterion and the total."""
    found = flags(r)
    out = [f"**Flags first:** {'; '.join(md(f) for f in found)}" if found else "**Flags:** none", "",
           "| # | Criterion | Suggested | Points | Mark | Confidence | Decided by |", "|---|---|---|---:|---|---|---|"]
    for c in r["criteria"]:
        rule = rule_reasons(c)[0][0] if c.get("reasons") else c.get("rule", "")
        out.append(f"| {c['number']} | {md(c['title'])} | {md(c['level'])} | {c['points']} / {c['weight']} | "
                   f"{mark(c)} | {md(confidence(c))} | {md(rule)} |")
    out.append(f"| | **Total (suggested)** | | **{r['total']} / {r['max_total']}** | | | |")
    return out


def markdown(r: dict) -> str:
    out = [NO_SANDBOX_LINE, ""] if r.get("sandbox") == "none" else []
    out += [f"# Grading evidence: {md(r['learner'])}", ""]
    out += summary(r)
    out += ["", "Every level is a suggestion computed from the evidence; the instructor reads the evidence and decides "
            "(HOLD: talk to the learner first; READ: confirm the prose with the quoted sentences). Graded on a copy of "
            f"{md_code(r.get('submission', '?'))} with the lab {md_code(r.get('lab', '?'))}; every test, probe, signal "
            "and excerpt is in the JSON report and the class page.", ""]
    for c in r["criteria"]:
        out += [f"## C{c['number']}. {md(c['title'])}: {md(c['level'])} ({c['points']} / {c['weight']})"
                + (f" {mark(c)}" if mark(c) and mark(c) != c["level"] else ""), ""]
        out += [f"- [{md(rule)}] {md(text)}" for rule, text in rule_reasons(c)[:5]]
        out += [f"    > {md(q[:300])}" for q in quotes(c)[:3]]
        out += _facts(r, c["number"]) + [""]
    skipped = r.get("copy_notes") or []
    if skipped:
        out += ["Not copied from the submission: " + "; ".join(md_code(p) for p, _ in skipped[:6])
                + (f" and {len(skipped) - 6} more" if len(skipped) > 6 else ""), ""]
    return "\n".join(out)


def _facts(r: dict, number: int) -> list:
    """The few observations that most often decide a criterion, in one line each."""
    out = []
    if number == 1:
        titles = {m.id: m.title for m in milestones(True)}
        out += [f"- {m} {titles.get(m, '')}: {md(line)}" for m, line in r.get("board", {}).items()
                if not str(line).startswith("no tests")]
        for nodeid, lines in failures(r, limit=2):
            out.append(f"- failing {md_code(nodeid.split('::')[-1])}: " + " / ".join(md_code(x, 160) for x in lines[:3]))
    elif number == 3:
        for name, p in broken_probes(r, limit=2):
            out.append(f"- battery {md(name)}, {md(p.get('probe', ''))}: {md(p.get('result', ''))} for "
                       f"{md_code(p.get('argument', ''), 120)}")
    elif number == 5:
        out += [f"- {md(b)} {md(field)}: pasted {md_code(pasted, 80)}, fresh run {md_code(fresh, 80)}"
                for b, field, pasted, fresh in differing_evidence(r)[:3]]
    # Findings on the write-up, each with the id the CSV's drop_findings column takes.
    out += [f"- {md(f.get('id', ''))} ({'finding' if f.get('caps') else 'question for you'}, {md(f.get('where', ''))}): "
            f"{md(str(f.get('instructor', ''))[:300])}" for f in r.get("findings") or []
            if isinstance(f, dict) and f.get("criterion") == number][:8]
    return out
