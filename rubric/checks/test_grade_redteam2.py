"""Course checks from the second red-team pass over the grader (issue 26): each test is one attack
or unfairness that worked on 962e0be, and shows it defeated.

1. no evidence is never a pass: a guiding test missing from the stream, a probe not asked, an
   import that exits or stalls is "not observed" (HOLD where the learner's code caused it, READ
   where the grader's own limits did), never "all 0 cases pass".
2. Gradescope without namespaces: a separate unprivileged user, or a results.json that says the
   submission could not be graded safely; never a silent --no-sandbox.
3. the probe process looks like an ordinary run, and its answer channel and nonce are out of the
   learner function's reach.
4. every read-back from the work folder is bounded (a FIFO cannot hang the grader).
5. CPU per command, so a neighbour's busy processes cost no grade.
7. names: unique file stems, csv_uncell takes off only its own ', --finalize refuses one row.
Tests that need bubblewrap or root skip, with the reason, where they cannot run.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import pytest

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:
    sys.path.append(str(RUBRIC))

from grading import decisions, grader, safe_text  # noqa: E402

# --------------------------------------------------------------------------- 7. names


def test_learner_names_that_differ_never_share_a_report_file():
    """`alice:1` became `alice_1`, the file of another learner: one report overwrote the other."""
    names = ["alice:1", "alice_1", "alice/1", ".alice_1", "alice\x001", "a" * 130, "a" * 131]
    stems = [safe_text.file_stem(n) for n in names]
    assert len(set(stems)) == len(names), stems
    assert safe_text.file_stem("alice_1") == "alice_1"          # a plain name keeps its plain file name
    assert all("/" not in s and ":" not in s and not s.startswith(".") for s in stems), stems


@pytest.mark.parametrize("value", ["'=1+1", "''x", "'plain", "=1+1", "-3", "bob", "'"])
def test_csv_uncell_takes_off_only_the_apostrophe_csv_cell_added(value):
    assert safe_text.csv_uncell(safe_text.csv_cell(value)) == value


def _report(name: str) -> dict:
    r = grader.could_not_grade(Path("/submissions") / name, "synthetic report for a CSV check")
    for c in r["criteria"]:
        c.update(level="Proficient", points=c["weight"] * 3 // 4, mark=None)
    r["total"] = sum(c["points"] for c in r["criteria"])
    return r


def test_finalize_refuses_one_bad_row_and_writes_the_rest_of_the_class(tmp_path):
    """Learners named `'=1+1` (its own apostrophe) and `alice:1` next to `alice_1`: before, the
    apostrophe was lost on reading, the two alices shared one report, and one bad cell anywhere
    refused the whole class."""
    reports = tmp_path / "reports"
    reports.mkdir()
    rs = [_report(n) for n in ("'=1+1", "alice:1", "alice_1", "carol")]
    for r in rs:
        (reports / f"{safe_text.file_stem(r['learner'])}.json").write_text(json.dumps(r), encoding="utf-8")
    assert len(list(reports.glob("*.json"))) == 4
    decisions.write_csv(rs, tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        if row["learner"] == "carol":
            row["c3_level"] = "Great"          # the one bad row
    with open(tmp_path / "edited.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    errors = decisions.finalize(tmp_path / "edited.csv", reports, tmp_path / "final.csv", tmp_path / "fb")
    assert len(errors) == 1 and "'carol'" in errors[0] and "Great" in errors[0], errors
    with open(tmp_path / "final.csv", newline="", encoding="utf-8") as fh:
        final = sorted(safe_text.csv_uncell(r["learner"]) for r in csv.DictReader(fh))
    assert final == sorted(["'=1+1", "alice:1", "alice_1"]), final
    assert len(list((tmp_path / "fb").glob("*.md"))) == 3
