"""The grades CSV the instructor edits, and --finalize: their decisions in, final grades and feedback out.

    write_csv(results, path)          one row per learner: per criterion the suggested level (HOLD where
                                      the instructor must talk to the learner first), points, mark,
                                      confidence and the reasons with the rule that decided
    finalize(edited, reports, ...)    validate the edited CSV, then write final grades and feedback

The instructor changes a criterion by writing another level into its ``cN_level`` cell (points follow
the rubric's table) and may write a sentence for the learner into ``note_to_learner``. Every cell
that starts with =, +, -, @, tab or CR is written with a leading ' so a spreadsheet shows it as text
(safe_text.csv_cell); the ' is taken off again when the CSV is read back.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from grading import criteria, feedback
from grading.report import SHORT, confidence, flags, mark, rule_reasons
from grading.safe_text import csv_cell, csv_uncell, file_stem, terminal

HOLD = "HOLD"
NOTE = "note_to_learner"
DROP = "drop_findings"     # finding ids (F1 F3) the instructor strikes out: they leave the feedback


def csv_header() -> list:
    per = [f"c{n}_{what}" for n in SHORT for what in ("level", "points", "mark", "confidence", "why")]
    return ["learner", "suggested_total", "max_total", "flags"] + per + [NOTE, DROP, "findings", "report"]


def csv_row(r: dict) -> list:
    row = [r["learner"], r["total"], r["max_total"], " ".join("; ".join(flags(r)).split())]
    by = {c["number"]: c for c in r["criteria"]}
    for n in SHORT:
        c = by.get(n, {"number": n, "level": "", "points": "", "reasons": []})
        held = mark(c) == HOLD
        row += [HOLD if held else c["level"], "" if held else c["points"], mark(c), confidence(c),
                " | ".join(f"[{rule}] {' '.join(text.split())}" for rule, text in rule_reasons(c))]  # one line a row
    shown = [f"{f.get('id')}: {' '.join(str(f.get('instructor', '')).split())[:200]}" for f in r.get("findings") or []
             if isinstance(f, dict) and f.get("caps")]
    return row + ["", "", " | ".join(shown), r.get("report_path", "")]


def write_csv(results: list, path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(csv_header())
        for r in results:
            writer.writerow([csv_cell(v) for v in csv_row(r)])


def load_reports(folder: Path) -> dict:
    """learner -> the JSON report grade.py wrote into ``folder``."""
    out = {}
    for path in sorted(folder.glob("*.json")):
        try:
            r = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(r, dict) and "learner" in r and "criteria" in r:
            out[r["learner"]] = r
    return out


def read_decisions(edited: Path, reports: dict, rubric: dict) -> tuple:
    """(decisions, errors): learner -> ({number: (level, points)}, note); errors one line each."""
    errors, decisions, refused = [], {}, set()
    try:
        with open(edited, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
            columns = set(rows[0]) if rows else set()
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        return {}, [f"{edited}: cannot read it as a CSV: {exc}"]
    missing = [c for c in ["learner"] + [f"c{n}_level" for n in SHORT] if c not in columns]
    if not rows or missing:
        return {}, [f"{edited}: " + (f"column(s) {', '.join(missing)} missing (keep the header row grade.py wrote)"
                                     if rows else "no learner rows")]
    by_level = {level.lower(): level for level in criteria.LEVELS}
    known = {terminal(name): name for name in reports}  # the CSV holds names with control characters escaped
    for line, row in enumerate(rows, 2):
        raw = row.get("learner") or ""
        cell = raw if known.get(raw, raw) in reports else csv_uncell(raw)   # a learner's own leading ' stays
        learner = known.get(cell, cell)
        where = f"{edited}:{line}: {cell!r}"
        if learner not in reports:
            errors.append(f"{where}: unknown learner (no JSON report with that name)")
            continue
        if learner in decisions or learner in refused:
            errors.append(f"{where}: this learner has two rows")
            decisions.pop(learner, None)
            refused.add(learner)
            continue
        chosen, before = {}, len(errors)
        for n in SHORT:
            cell = csv_uncell((row.get(f"c{n}_level") or "").strip())
            if cell.upper() == HOLD:
                errors.append(f"{where}: C{n} is still HOLD: talk to the learner, then write the level you decide")
            elif cell.lower() not in by_level:
                errors.append(f"{where}: C{n} level {cell!r} is not in the rubric ({', '.join(criteria.LEVELS)})")
            else:
                level = by_level[cell.lower()]
                chosen[n] = (level, rubric[n].points[level])
        if len(errors) > before:   # a row with a problem is refused, the rest of the class is not
            refused.add(learner)
            continue
        decisions[learner] = (chosen, csv_uncell(row.get(NOTE) or ""))
    return decisions, errors


def read_dropped(edited: Path, reports: dict) -> tuple:
    """(learner -> {finding ids}, errors) from the drop_findings column: ids separated by spaces or
    commas, each one the learner's report lists (a CSV without the column drops nothing)."""
    dropped, errors = {}, []
    try:
        with open(edited, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error):
        return {}, []   # read_decisions reports an unreadable file
    known = {terminal(name): name for name in reports}
    for line, row in enumerate(rows, 2):
        cell = csv_uncell(row.get("learner") or "")
        learner = known.get(cell, cell)
        ids = {x.upper() for x in re.split(r"[\s,;]+", csv_uncell(row.get(DROP) or "")) if x}
        if learner not in reports or not ids:
            continue
        listed = {str(f.get("id", "")).upper() for f in reports[learner].get("findings") or [] if isinstance(f, dict)}
        unknown = sorted(ids - listed)
        if unknown:
            errors.append(f"{edited}:{line}: {cell!r}: {DROP} names {', '.join(unknown)}, not a finding of this learner's "
                          f"report ({', '.join(sorted(listed)) or 'none'})")
        dropped[learner] = ids & listed
    return dropped, errors


def final_header() -> list:
    return (["learner", "total", "max_total"] + [f"c{n}_{SHORT[n]}" for n in SHORT] + [f"c{n}_level" for n in SHORT]
            + ["changed_from_suggestion", NOTE])


def finalize(edited: Path, reports_dir: Path, final_csv: Path, feedback_dir: Path) -> list:
    """Errors (one line per refused row) after writing the final CSV and feedback files for every other
    row; nothing is written when the file itself or every row is unusable."""
    reports = load_reports(reports_dir)
    if not reports:
        return [f"{reports_dir}: no JSON reports (grade.py --out writes them; pass the same --out here)"]
    rubric = criteria.load_rubric()
    decisions, errors = read_decisions(edited, reports, rubric)
    dropped, drop_errors = read_dropped(edited, reports)
    errors += drop_errors   # an unknown id is reported; the row keeps the findings it named rightly
    if not decisions:   # one bad row costs that row only; with no good row, nothing is written
        return errors
    feedback_dir.mkdir(parents=True, exist_ok=True)
    with open(final_csv, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(final_header())
        for learner, (chosen, note) in sorted(decisions.items()):
            r = reports[learner]
            suggested = {c["number"]: (HOLD if mark(c) == HOLD else c["level"]) for c in r["criteria"]}
            changed = [f"C{n} {suggested.get(n)} -> {level}" for n, (level, _) in chosen.items() if suggested.get(n) != level]
            row = ([learner, sum(p for _, p in chosen.values()), r["max_total"]] + [chosen[n][1] for n in SHORT]
                   + [chosen[n][0] for n in SHORT] + ["; ".join(changed), note])
            writer.writerow([csv_cell(v) for v in row])
            (feedback_dir / f"{file_stem(learner)}.md").write_text(feedback.render(r, chosen, note, dropped.get(learner, ())),
                                                                        encoding="utf-8")
    return errors
