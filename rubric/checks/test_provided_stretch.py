"""Course checks (maintainers): the provided half of the stretch milestones works on its own.

code/stretch.py is mostly provided: the edit_file flow (dry run, confirmation, writing), the forced
emit_answer turn with one retry, the wiring of extra tools around run_agent, and copilot.py's
--trace / --allow-edits / --structured handling. These checks replace the learner-owned functions
(trace_steps, plan_edit, validate_answer, and parse_tool_calls where needed) with small stand-ins,
so they pass on the shipped stubs and on the reference alike. The learner-owned functions are
tested by code/tests/test_s*_*.py; the last check here plants known-wrong versions of them
(mutants.STRETCH_MUTANTS) and proves those guiding tests catch each one.
"""

from __future__ import annotations

import importlib
import io
import json
from pathlib import Path

import pytest

from harness.milestones import LEARNER_FUNCTIONS
from harness.paths import CODE_DIR
from harness.strict_provider import check_request
from mutants import STRETCH_MUTANTS
from test_course import _plant, run_pytest

stretch = importlib.import_module("stretch")
agent_loop = importlib.import_module("agent_loop")
tools = importlib.import_module("tools")
copilot = importlib.import_module("copilot")
llm = importlib.import_module("llm")
report = importlib.import_module("report")


# ---------------------------------------------------------------- stand-ins for learner-owned functions

def plan_stand_in(repo_root, path, old_string, new_string):
    """Enough of plan_edit for the provided flow: refusals by prefix, one replacement, a diff."""
    if path.startswith("tests/"):
        raise tools.ToolError(f"{path!r} is a test file: {stretch.TEST_REFUSAL}")
    if path.startswith(".."):
        raise ValueError(f"{path!r} is outside the repository")
    target = Path(repo_root) / path
    text = target.read_text()
    new_text = text.replace(old_string, new_string, 1)
    return stretch.Edit(path, target, text, new_text, stretch.unified_diff(path, text, new_text))


def parse_stand_in(message):
    return [agent_loop.ToolCall(c.id, c.function.name, json.loads(c.function.arguments))
            for c in getattr(message, "tool_calls", None) or []]


def reply(*calls, content=None):
    """A LiteLLM-shaped message; calls are (id, name, arguments dict)."""
    from types import SimpleNamespace as NS
    return NS(content=content, tool_calls=[NS(id=i, type="function", function=NS(name=n, arguments=json.dumps(a)))
                                           for i, n, a in calls])


class Recorder:
    """complete(messages, tools, tool_choice=...) answering from a list, checking each request."""

    def __init__(self, replies):
        self.replies, self.choices = list(replies), []

    def __call__(self, messages, tool_schemas, tool_choice="auto"):
        check_request(messages, tool_schemas)
        self.choices.append(tool_choice)
        return self.replies[len(self.choices) - 1]


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return root


# ---------------------------------------------------------------- schemas and rules

def test_stretch_tool_schemas_are_well_formed_and_expose_no_root():
    for schema, name in ((stretch.EDIT_FILE_SCHEMA, "edit_file"), (stretch.EMIT_ANSWER_SCHEMA, "emit_answer")):
        fn = schema["function"]
        assert schema["type"] == "function" and fn["name"] == name and len(fn["description"]) > 80
        params = fn["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
        assert not {"root", "repo_root", "repo"} & set(params["properties"])
    citation = stretch.EMIT_ANSWER_SCHEMA["function"]["parameters"]["properties"]["citations"]["items"]
    assert citation["required"] == ["path", "start_line", "end_line"]
    assert stretch.FORCE_EMIT_ANSWER == {"type": "function", "function": {"name": "emit_answer"}}
    check_request([{"role": "user", "content": "q"}], [*tools.TOOL_SCHEMAS, stretch.EMIT_ANSWER_SCHEMA])


@pytest.mark.parametrize("path, is_test", [
    ("tests/test_service.py", True), ("tests/helpers.py", True), ("pkg/tests/data.json", True),
    ("test_app.py", True), ("pkg/app_test.py", True), ("conftest.py", True), ("pkg/CONFTEST.py", True),
    ("Tests/x.py", True), ("pkg/app.py", False), ("testing.py", False), ("test_data.json", False),
    ("pkg/contest.py", False), ("latest/app.py", False), ("attest_app.py", False),
])
def test_test_files_are_recognised_by_their_path(path, is_test):
    assert stretch.is_test_path(tuple(path.split("/"))) is is_test


def test_read_text_refuses_what_an_edit_must_not_touch(tmp_path):
    (tmp_path / "bin.dat").write_bytes(b"\x00\x01text")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "big.txt").write_bytes(b"x" * (stretch.MAX_EDIT_BYTES + 1))
    (tmp_path / "folder").mkdir()
    for name, words in (("bin.dat", "binary"), ("latin1.txt", "UTF-8"), ("big.txt", "larger"),
                        ("folder", "not an existing file"), ("missing.py", "not an existing file")):
        with pytest.raises(tools.ToolError, match=words):
            stretch.read_text(tmp_path / name, name)


def test_unified_diff_is_git_style():
    diff = stretch.unified_diff("pkg/calc.py", "a\nb\n", "a\nc\n")
    assert diff.splitlines()[:2] == ["--- a/pkg/calc.py", "+++ b/pkg/calc.py"]
    assert "-b\n+c\n" in diff
    assert stretch.unified_diff("x.py", "last", "final").endswith("+final\n")  # no newline at the end


# ---------------------------------------------------------------- the edit_file flow (S2, provided part)

ADD_FIX = {"path": "pkg/calc.py", "old_string": "a - b", "new_string": "a + b"}


def test_dry_run_shows_the_diff_and_writes_nothing(repo, monkeypatch):
    monkeypatch.setattr(stretch, "plan_edit", plan_stand_in)
    policy = stretch.EditPolicy()
    before = (repo / "pkg" / "calc.py").read_bytes()
    result = stretch.edit_file_tool(ADD_FIX, repo, policy)
    assert result.startswith("Dry run: pkg/calc.py was NOT changed") and "+    return a + b" in result
    assert (repo / "pkg" / "calc.py").read_bytes() == before
    assert [e["status"] for e in policy.log] == ["dry_run"] and "-    return a - b" in policy.log[0]["diff"]


def test_applying_needs_a_confirmation_channel_and_a_yes(repo, monkeypatch):
    monkeypatch.setattr(stretch, "plan_edit", plan_stand_in)
    target = repo / "pkg" / "calc.py"
    before = target.read_bytes()
    nobody = stretch.EditPolicy(apply=True, confirm=None)
    assert "nobody can confirm" in stretch.edit_file_tool(ADD_FIX, repo, nobody)
    asked = []
    declined = stretch.EditPolicy(apply=True, confirm=lambda edit: asked.append(edit.path) or False)
    assert "declined" in stretch.edit_file_tool(ADD_FIX, repo, declined)
    assert asked == ["pkg/calc.py"] and target.read_bytes() == before
    assert [nobody.log[0]["status"], declined.log[0]["status"]] == ["unconfirmed", "declined"]
    yes = stretch.EditPolicy(apply=True, confirm=lambda edit: True)
    assert stretch.edit_file_tool(ADD_FIX, repo, yes).startswith("Applied: pkg/calc.py")
    assert target.read_text() == "def add(a, b):\n    return a + b\n"


def test_a_file_changed_after_planning_is_not_overwritten(repo, monkeypatch):
    def confirm_after_someone_else_wrote(edit):
        edit.target.write_text("def add(a, b):\n    return b - a\n")
        return True

    monkeypatch.setattr(stretch, "plan_edit", plan_stand_in)
    policy = stretch.EditPolicy(apply=True, confirm=confirm_after_someone_else_wrote)
    result = stretch.edit_file_tool(ADD_FIX, repo, policy)
    assert result.startswith("Error:") and "changed after" in result
    assert (repo / "pkg" / "calc.py").read_text().endswith("b - a\n")


@pytest.mark.parametrize("args, words", [
    ({"path": "tests/test_calc.py", "old_string": "x", "new_string": "y"}, "tests are the specification"),
    ({"path": "../outside.py", "old_string": "x", "new_string": "y"}, "inside the repository only"),
    ({"path": "pkg/calc.py", "old_string": "x"}, "missing: ['new_string']"),
    ({"path": "pkg/calc.py", "old_string": "x", "new_string": 3}, "not strings: ['new_string']"),
    ({"path": "pkg/calc.py", "old_string": "x", "new_string": "y", "repo_root": "/"}, "unexpected: ['repo_root']"),
    (["pkg/calc.py"], "must be a JSON object"),
])
def test_refusals_are_observations_not_exceptions(repo, monkeypatch, args, words):
    monkeypatch.setattr(stretch, "plan_edit", plan_stand_in)
    result = stretch.edit_file_tool(args, repo, stretch.EditPolicy(apply=True, confirm=lambda edit: True))
    assert result.startswith("Error:") and words in result
    assert (repo / "pkg" / "calc.py").read_text().endswith("a - b\n")


@pytest.mark.parametrize("typed, expected", [("y\n", True), ("YES\n", True), ("\n", False), ("n\n", False), ("", False)])
def test_the_terminal_prompt_defaults_to_no(repo, monkeypatch, capsys, typed, expected):
    edit = plan_stand_in(repo, "pkg/calc.py", "a - b", "a + b")
    monkeypatch.setattr("sys.stdin", io.StringIO(typed))
    assert stretch.ask_on_terminal(edit) is expected
    err = capsys.readouterr().err
    assert "+    return a + b" in err and "Apply this edit to pkg/calc.py? [y/N]" in err


# ---------------------------------------------------------------- wiring extra tools around run_agent

def test_extra_tools_route_by_name_and_always_restore_dispatch():
    original = (agent_loop.dispatch_tool, tools.dispatch_tool)
    seen = []

    def complete(messages, tool_schemas, **options):
        seen.append(([t["function"]["name"] for t in tool_schemas], options))

    schema = {"type": "function", "function": {"name": "extra", "description": "d", "parameters": {"type": "object"}}}
    with pytest.raises(RuntimeError):
        with stretch.extra_tools(complete, {"extra": (schema, lambda args, root: f"extra {args} {root}")}) as offered:
            assert agent_loop.dispatch_tool("extra", {"a": 1}, "R") == "extra {'a': 1} R"
            offered([], tools.TOOL_SCHEMAS, tool_choice="auto")
            raise RuntimeError("a crash inside the run")
    assert (agent_loop.dispatch_tool, tools.dispatch_tool) == original
    assert seen == [(["read_file", "list_directory", "search_code", "extra"], {"tool_choice": "auto"})]
    with stretch.extra_tools(complete, {}) as same:
        assert same is complete and agent_loop.dispatch_tool is original[0]


# ---------------------------------------------------------------- the forced emit_answer turn (S3, provided part)

ANSWER = {"answer": "add subtracts", "citations": [{"path": "pkg/calc.py", "start_line": 2, "end_line": 2}]}
START = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
         {"role": "assistant", "content": "add subtracts (pkg/calc.py:2)"}]


def test_an_invalid_answer_is_sent_back_once_then_accepted(monkeypatch):
    verdicts = iter([["citations[0] pkg/calc.py:2-2: never read"], []])
    monkeypatch.setattr(agent_loop, "parse_tool_calls", parse_stand_in)
    monkeypatch.setattr(stretch, "validate_answer", lambda *args: next(verdicts))
    model = Recorder([reply(("e1", "emit_answer", ANSWER)), reply(("e2", "emit_answer", ANSWER))])
    messages = list(START)
    final = stretch.finish_with_emit_answer(messages, "R", model, [])
    assert final.accepted and final.attempts == 2 and final.forced and final.answer == "add subtracts"
    assert model.choices == [stretch.FORCE_EMIT_ANSWER] * 2
    check_request(messages, tools.TOOL_SCHEMAS)  # every forced call answered: the transcript stays valid
    sent_back = [m["content"] for m in messages if m.get("role") == "tool"]
    assert sent_back[0].startswith("Error:") and "never read" in sent_back[0] and sent_back[1] == "Accepted."


def test_a_second_invalid_answer_stops_without_a_third_call(monkeypatch):
    monkeypatch.setattr(agent_loop, "parse_tool_calls", parse_stand_in)
    monkeypatch.setattr(stretch, "validate_answer", lambda *args: ["citations[0] bad"])
    model = Recorder([reply(("e1", "emit_answer", ANSWER)), reply(("e2", "emit_answer", ANSWER))])
    final = stretch.finish_with_emit_answer(list(START), "R", model, [])
    assert not final.accepted and final.attempts == 2 and final.problems == ["citations[0] bad"]
    assert len(model.choices) == 2


def test_extra_calls_in_the_forced_turn_are_answered_and_plain_text_is_parsed(monkeypatch):
    monkeypatch.setattr(agent_loop, "parse_tool_calls", parse_stand_in)
    checked = []
    monkeypatch.setattr(stretch, "validate_answer", lambda arguments, *rest: checked.append(arguments) or [])
    messages = list(START)
    both = reply(("r", "read_file", {"path": "x"}), ("e", "emit_answer", ANSWER))
    stretch.finish_with_emit_answer(messages, "R", Recorder([both]), [])
    check_request(messages, tools.TOOL_SCHEMAS)
    assert [m["content"] for m in messages if m.get("role") == "tool"] == [
        "Error: only emit_answer can be called now.", "Accepted."]
    plain = stretch.finish_with_emit_answer(list(START), "R", Recorder([reply(content="See ./pkg/calc.py:2-3.")]), [])
    assert not plain.forced and checked[-1]["citations"] == [{"path": "pkg/calc.py", "start_line": 2, "end_line": 3}]


# ---------------------------------------------------------------- copilot.py's stretch options

def test_only_a_forced_call_lets_litellm_drop_a_tool_choice_the_model_cannot_honour(monkeypatch, tmp_path):
    """LiteLLM 1.110.2 raises for a named tool_choice on models flagged supports_forced_tool_use: false
    unless drop_params, which downgrades it to auto; ordinary calls stay exactly as they were."""
    from types import SimpleNamespace as NS

    litellm = pytest.importorskip("litellm")
    sent = []
    answer = NS(choices=[NS(message=NS(content="ok", tool_calls=None))], usage=None)
    monkeypatch.setattr(litellm, "completion", lambda **kwargs: sent.append(kwargs) or answer)
    settings = importlib.import_module("config").Settings("anthropic/claude-haiku-4-5", None, "k", None, None, None, tmp_path)
    complete = llm.make_complete(settings)
    complete([{"role": "user", "content": "q"}], tools.TOOL_SCHEMAS)
    complete([{"role": "user", "content": "q"}], [stretch.EMIT_ANSWER_SCHEMA], tool_choice=stretch.FORCE_EMIT_ANSWER)
    assert sent[0]["tool_choice"] == "auto" and "drop_params" not in sent[0]
    assert sent[1]["tool_choice"] == stretch.FORCE_EMIT_ANSWER and sent[1]["drop_params"] is True


def test_trace_before_s1_is_one_line_and_json_says_why(monkeypatch, capsys):
    def not_done(messages):
        raise NotImplementedError("S1: stretch.trace_steps is not implemented yet")

    monkeypatch.setattr(stretch, "trace_steps", not_done)
    result = report.Result(question="q", repo="r", model="m", answer="the answer", termination="answered",
                           messages=list(START))
    report.print_report(result, trace=True)
    out, err = capsys.readouterr()
    assert err.strip() == f"copilot: {report.TRACE_NOT_DONE}" and out.startswith("the answer")
    data = result.to_json()
    assert data["trace"] is None and "S1" in data["trace_note"]


@pytest.mark.parametrize("flags", [["--apply"], ["--yes"], ["--allow-edits", "--yes"]])
def test_edit_flags_without_their_prerequisite_exit_2_in_one_line(flags, capsys, tmp_path):
    assert copilot.main(["--repo", str(tmp_path), *flags, "q"], complete=lambda *a, **k: None) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "--allow-edits" in err


def test_help_lists_the_stretch_options(capsys):
    with pytest.raises(SystemExit):
        copilot.parse_args(["--help"])
    out = capsys.readouterr().out
    assert all(flag in out for flag in ("--allow-edits", "--apply", "--yes", "--structured", "--trace"))


# ---------------------------------------------------------------- the stretch guiding tests can fail

@pytest.mark.parametrize("mutant", STRETCH_MUTANTS, ids=[m.name for m in STRETCH_MUTANTS])
def test_each_stretch_mistake_is_caught_by_the_test_named_for_it(mutant, tmp_path):
    impl = tmp_path / "impl"
    impl.mkdir()
    _plant(mutant, impl)
    milestone = LEARNER_FUNCTIONS[f"stretch.{mutant.function}"].id.lower()
    files = [f"code/tests/{p.name}" for p in sorted((CODE_DIR / "tests").glob(f"test_{milestone}_*.py"))]
    _, record = run_pytest(["--impl-dir", str(impl), "--unlock-all", "--stretch", *files], tmp_path)
    failed = {t["nodeid"].split("::", 1)[1] for t in record["tests"] if t["outcome"] == "failed"}
    missed = [name for name in mutant.caught_by if not any(f.startswith(name) for f in failed)]
    assert not missed, f"mistake {mutant.name!r} was not caught by {missed}; failing tests were {sorted(failed)}"
