"""Course check: rubric/grade.py on the course's own hand-graded class agrees with the hand key.

The class is data in rubric/checks/class/ (built by classroom.py); class/key.json holds the hand
grades, committed before the grader was first run on the class. Slow on purpose: one folder-mode
grading of 14 learners through the command line, in the sandbox where there is one (7.5 minutes
on 2 cores shared with other work, 35-90 s per learner); the other tests here take under a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:
    sys.path.append(str(RUBRIC))

from grading import documents, history, sandbox, similarity  # noqa: E402
from grading.workspace import LAB_ROOT  # noqa: E402

import classroom  # noqa: E402

CRITERIA = [f"C{n}" for n in range(1, 8)]
ORDER = ("Exemplary", "Proficient", "Developing", "Missing", "HOLD")
HONEST = [name for name, key in classroom.KEY.items() if "HOLD" not in key.values()]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("class")
    for name in classroom.KEY:
        classroom.build(name, base / "submissions" / name)
    env = {k: v for k, v in os.environ.items() if k != "LESSON06_IMPL"}
    no_sandbox = [] if sandbox.choose("auto")[0] else ["--no-sandbox"]  # as test_grade.py does
    proc = subprocess.run([sys.executable, str(RUBRIC / "grade.py"), str(base / "submissions"), "--csv",
                           str(base / "grades.csv"), "--out", str(base / "reports"), "--jobs", "2", *no_sandbox],
                          env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tool = {}
    for name in classroom.KEY:
        report = json.loads((base / "reports" / f"{name}.json").read_text(encoding="utf-8"))
        tool[name] = {f"C{c['number']}": c["level"] for c in report["criteria"]}
        tool[name]["_rules"] = {f"C{c['number']}": c["rule"] for c in report["criteria"]}
    pairs = json.loads((base / "reports" / "class.json").read_text(encoding="utf-8"))["similar_pairs"]
    table = confusion(tool)
    print("\n" + table)
    return {"tool": tool, "pairs": pairs, "table": table}


def confusion(tool: dict) -> str:
    """The hand key against the tool: a confusion table and each disagreement with its rule."""
    counts = Counter((classroom.KEY[n][c], tool[n][c]) for n in classroom.KEY for c in CRITERIA)
    width = max(map(len, ORDER)) + 2
    lines = ["hand \\ tool".ljust(width) + "".join(level[:10].rjust(width) for level in ORDER)]
    lines += [hand.ljust(width) + "".join(str(counts.get((hand, t), 0)).rjust(width) for t in ORDER) for hand in ORDER]
    for n in classroom.KEY:
        lines += [f"  {n} {c}: key {classroom.KEY[n][c]}, tool {tool[n][c]} ({tool[n]['_rules'][c]})"
                  for c in CRITERIA if classroom.KEY[n][c] != tool[n][c]]
    return "\n".join(lines)


def agreement(tool: dict, criteria) -> float:
    pairs = [(classroom.KEY[n][c], tool[n][c]) for n in classroom.KEY for c in criteria]
    return sum(a == b for a, b in pairs) / len(pairs)


def test_the_tool_agrees_with_the_hand_key_on_at_least_80_percent_of_levels(graded):
    assert agreement(graded["tool"], CRITERIA) >= 0.80, graded["table"]


def test_the_code_criteria_agree_on_at_least_90_percent(graded):
    assert agreement(graded["tool"], ("C1", "C2", "C3")) >= 0.90, graded["table"]


def test_no_high_level_where_the_key_says_hold_or_missing(graded):
    wrong = [(n, c, graded["tool"][n][c]) for n, key in classroom.KEY.items() for c in CRITERIA
             if key[c] in ("HOLD", "Missing") and graded["tool"][n][c] in ("Exemplary", "Proficient")]
    assert not wrong, f"Exemplary/Proficient suggested where the hand key says HOLD or Missing: {wrong}\n{graded['table']}"


def test_no_hold_on_an_honest_submission(graded):
    held = [(n, c) for n in HONEST for c in CRITERIA if graded["tool"][n][c] == "HOLD"]
    assert not held, f"HOLD on honest submissions: {held}\n{graded['table']}"


def test_the_class_view_lists_the_copied_reference_and_the_shared_write_up(graded):
    pairs = graded["pairs"]
    assert any({p["a"], p["b"]} == {"gus_copied", "rubric/reference"} and p["kind"] == "functions" and p["score"] == 1.0
               for p in pairs), pairs[:5]
    prose = [p for p in pairs if p["kind"] == "prose"]
    assert prose and all(p["shared"] for p in prose), prose[:3]
    assert not any("ivy_generic" in (p["a"], p["b"]) and p["kind"] == "prose" and p["score"] > 0.9 for p in pairs), \
        "ivy's generic prose shares nothing with the class's write-up beyond the template"


# --------------------------------------------------------------------------- fast checks

def test_the_current_templates_are_in_the_shipped_manifest():
    listed = history.shipped_template_ids()
    for name in ("UNDERSTANDING.md", "FAILURE_ANALYSIS.md"):
        blob = history.blob_id((LAB_ROOT / name).read_bytes())
        assert history.is_listed((LAB_ROOT / name).read_bytes(), listed.get(name, set())), (
            f"{name} changed: add the line '{blob} {name}' to rubric/grading/shipped_templates.txt so the grader "
            "knows this version is a template")


def test_grading_from_inside_a_filled_clone_reads_the_shipped_template(tmp_path, monkeypatch):
    """rubric/grade.py run from a learner's own clone: their filled files must not become the template."""
    clone = tmp_path / "clone"
    (clone / "rubric" / "grading").mkdir(parents=True)
    (clone / "rubric" / "grading" / "shipped_templates.txt").write_bytes(history.MANIFEST.read_bytes())
    template = (LAB_ROOT / "UNDERSTANDING.md").read_text(encoding="utf-8")
    (clone / "UNDERSTANDING.md").write_text(template, encoding="utf-8")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    if subprocess.run([*git, "init", "-q"], capture_output=True).returncode != 0:
        pytest.skip("git is not available")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "lab"], check=True)
    answer = "My safe_resolve resolves first and compares by components, so ../outside never opens."
    filled = template.replace("**Your answer:**\n", f"**Your answer:**\n\n{answer}\n", 1)
    (clone / "UNDERSTANDING.md").write_text(filled, encoding="utf-8")
    subprocess.run([*git, "commit", "-qam", "my answers"], check=True)
    monkeypatch.setattr(history, "LAB_ROOT", clone)
    monkeypatch.setattr(history, "MANIFEST", clone / "rubric" / "grading" / "shipped_templates.txt")
    history.versions.cache_clear()
    history._blobs_by_path.cache_clear()
    try:
        lines = documents.template_lines("UNDERSTANDING.md")
        assert documents.norm(answer) not in lines, "the learner's own answer was read as the template"
        assert "**Your answer:**" in lines
        result = documents.understanding(clone / "UNDERSTANDING.md")
        assert result["answers"][0]["answered"] and answer in result["answers"][0]["text"]
    finally:
        history.versions.cache_clear()
        history._blobs_by_path.cache_clear()


def test_a_renamed_copy_of_the_reference_matches_and_own_idioms_do_not(tmp_path):
    gus = classroom.build("gus_copied", tmp_path / "gus")
    ada = classroom.build("ada_excellent", tmp_path / "ada")
    assert similarity.reference_matches(gus / "code") == sorted(classroom.FUNCTION_NAMES)
    assert similarity.reference_matches(ada / "code") == []
