"""Course check for rubric/agreement.py's arithmetic: what counts as agreeing with a hand key, and
what "confident" means (a level with no READ or HOLD mark). Fast: no grading run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

RUBRIC = Path(__file__).resolve().parents[1]
if str(RUBRIC) not in sys.path:
    sys.path.append(str(RUBRIC))

import agreement  # noqa: E402


def test_a_bundle_key_reads_letters_and_holds(tmp_path):
    (tmp_path / "key.json").write_text(json.dumps({"levels": {"ann": "EPDMEPD"}, "hold": {"ann": [1, 3]}}))
    key = agreement.bundle_key(tmp_path)
    assert key["ann"]["C1"] == ("Exemplary", True) and key["ann"]["C2"] == ("Proficient", False)
    assert key["ann"]["C4"] == ("Missing", False) and key["ann"]["C3"] == ("Developing", True)


def test_agreement_counts_a_hold_only_where_the_key_holds_and_confidence_only_without_a_mark():
    key = {"ann": {f"C{n}": ("Proficient", n == 1) for n in range(1, 8)}}
    key["ann"]["C2"] = (None, True)                         # the course key's bare HOLD
    tool = {"ann": {"C1": ("HOLD", "HOLD", "high"), "C2": ("Proficient", "", "high"), "C3": ("Proficient", "", "high"),
                    "C4": ("Exemplary", "READ", "medium"), "C5": ("HOLD", "HOLD", "high"),
                    "C6": ("Proficient", "READ", "medium"), "C7": ("Developing", "", "high")}}
    m = agreement.measure(key, tool)
    assert m["exact"] == 3, m["wrong"]                       # C1 (held both), C3, C6
    assert m["core_exact"] == 2 and m["core_cells"] == 3
    assert (m["confident"], m["confident_right"]) == (3, 1)  # C2, C3, C7 have no mark; only C3 is right
    assert (m["read"], m["read_right"], m["hold"], m["hold_right"]) == (2, 1, 2, 1)
    assert m["false_high"] == [("ann", "C2", "Proficient")]


def test_a_bundle_key_reads_one_entry_per_learner_with_level_names_and_holds(tmp_path):
    key = {"ann": {"key": {"C1": "Proficient", "C2": "E", "C3": "Developing", "C4": "Missing", "C5": "Exemplary",
                           "C6": "Proficient", "C7": "Developing"}, "hold": ["C1", 3]},
           "bob": {"key": {f"C{n}": "HOLD" for n in range(1, 8)}, "hold": []},
           "_about": "not a learner"}
    (tmp_path / "key.json").write_text(json.dumps(key))
    got = agreement.bundle_key(tmp_path)
    assert set(got) == {"ann", "bob"}
    assert got["ann"]["C1"] == ("Proficient", True) and got["ann"]["C2"] == ("Exemplary", False)
    assert got["ann"]["C3"] == ("Developing", True) and got["ann"]["C4"] == ("Missing", False)
    assert all(got["bob"][f"C{n}"] == (None, True) for n in range(1, 8))
