"""Course checks (maintainers): the documentation tells the truth about the code.

- every relative Markdown link (and its #anchor) and every backticked repository path exists;
  a `path:line` citation points at a line the file has;
- every `file.py:N` / `file.py:A-B` in the lesson, README.md, PROJECT.md and code/README.md lands
  on a line holding the name written beside it (line numbers drift with every edit);
- every backticked `module.name` for a lab module (tools, agent_loop, copilot, ...) exists in
  that module;
- every shell command shown in README.md, code/README.md and PROJECT.md that can run offline
  (pytest commands, --hint, --help, --context-only, --simulate) runs, from the folder the text
  implies, and does what the text promises (learner pytest commands print the board and, on the
  shipped stubs, exit 1; --reference exits 0);
- the maintainer command in README.md is the one .ci/run runs;
- the milestone list (ids and titles) matches harness/milestones.py in every document;
- every lesson pointer in the failure messages and docstrings ("Section 4, Example 1",
  "Section 9, first row", ...) names a heading or table row that exists in the lesson;
- the guided examples of the lesson's Section 4 print exactly the output shown under them.

Parsing is plain regular expressions over the Markdown, so a failure names the file and line.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.milestones import ALL, MILESTONES
from harness.paths import CODE_DIR, FIXTURE_REPO, REFERENCE_DIR, REPO_ROOT

LESSON = REPO_ROOT / "lesson" / "lesson.agent.md"

# The Markdown files a learner or an instructor reads.
DOC_GLOBS = ("README.md", "PROJECT.md", "UNDERSTANDING.md", "FAILURE_ANALYSIS.md", "lesson/*.md",
             "rubric/*.md", "code/README.md", "sources/**/*.md")
# Documents whose shell commands are run, and the folder each one's commands start in.
COMMAND_DOCS = {"README.md": REPO_ROOT, "PROJECT.md": REPO_ROOT, "code/README.md": CODE_DIR}
# Documents that list the milestones.
MILESTONE_DOCS = ("lesson/lesson.agent.md", "lesson/lesson.md", "PROJECT.md", "README.md",
                  "rubric/rubric.md", "code/README.md")
# Lab modules a backticked `module.name` may refer to (plus every other module in code/).
LAB_MODULES = {"tools", "agent_loop", "copilot", "config", "context_selector", "evaluate",
               "break_and_observe"}
# Paths the learner creates; the text may name them before they exist.
LEARNER_CREATED = {"code/.env"}
FILE_SUFFIXES = {"py", "md", "mdx", "txt", "json", "jsonl", "ini", "toml", "yaml", "yml", "cfg", "example"}
SHELL_LANGS = {"bash", "sh", "shell", "console"}
# Set in the environment of every command this file starts, so nothing can recurse into it.
SUBPROCESS_FLAG = "LESSON06_DOCS_CHECK_SUBPROCESS"


# --------------------------------------------------------------------------- reading Markdown

@dataclass
class Block:
    lang: str
    line: int           # line number of the first line inside the fence (1-based)
    lines: list[str]


@dataclass
class Doc:
    path: Path
    rel: str
    prose: list[str]    # the file's lines with fenced blocks blanked (line numbers kept)
    blocks: list[Block]


FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def read_doc(path: Path) -> Doc:
    prose, blocks, current = [], [], None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(line)
        if current is None and fence:
            current = Block(fence.group(2).lower(), number + 1, [])
            prose.append("")
        elif current is not None and fence and not fence.group(2):
            blocks.append(current)
            current = None
            prose.append("")
        elif current is not None:
            current.lines.append(line)
            prose.append("")
        else:
            prose.append(line)
    return Doc(path, path.relative_to(REPO_ROOT).as_posix(), prose, blocks)


def doc_paths() -> list[Path]:
    found = []
    for pattern in DOC_GLOBS:
        found += [p for p in sorted(REPO_ROOT.glob(pattern)) if p.is_file() and p not in found]
    return found


DOCS = [read_doc(p) for p in doc_paths()]


def doc(rel: str) -> Doc:
    return next(d for d in DOCS if d.rel == rel)


def code_spans(line: str) -> list[str]:
    return [m.group(2).strip() for m in CODE_SPAN.finditer(line)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(d: Doc) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in d.prose:
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            out.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
        out.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line))
    return out


def problems_message(problems: list[str], what: str) -> str:
    return f"{len(problems)} {what}:\n  " + "\n  ".join(problems)


def test_the_documents_exist():
    for rel in ("README.md", "PROJECT.md", "UNDERSTANDING.md", "lesson/lesson.agent.md", "lesson/lesson.md",
                "rubric/rubric.md", "code/README.md", "sources/resources.md"):
        assert (REPO_ROOT / rel).is_file(), f"{rel} is missing"


# --------------------------------------------------------------------------- links and paths

def test_relative_links_and_anchors_exist():
    cache = {d.path: anchors(d) for d in DOCS}
    problems = []
    for d in DOCS:
        for number, line in enumerate(d.prose, 1):
            for target in LINK.findall(CODE_SPAN.sub("", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                    continue
                path_part, _, anchor = target.partition("#")
                dest = (d.path.parent / path_part).resolve() if path_part else d.path
                where = f"{d.rel}:{number}"
                if not dest.exists():
                    problems.append(f"{where}: link target {path_part!r} does not exist")
                    continue
                if anchor and dest.suffix == ".md":
                    known = cache.get(dest)
                    if known is None:
                        known = cache[dest] = anchors(read_doc(dest))
                    if anchor not in known:
                        problems.append(f"{where}: {target!r}: no heading in {dest.relative_to(REPO_ROOT).as_posix()} "
                                        f"has the anchor #{anchor}")
    assert not problems, problems_message(problems, "broken links")


def _path_base(token: str) -> Path | None:
    """Where a backticked path token is relative to, or None if it is not a path into this repo."""
    first = token.split("/", 1)[0]
    if not first or first in (".", ".."):
        return None
    if (REPO_ROOT / first).exists() and (first not in ("conftest.py",) or "/" in token):
        return REPO_ROOT
    if "/" in token and (CODE_DIR / first).exists():
        return CODE_DIR
    if first == "shop":  # the fixture repository's package, as the lesson cites it
        return FIXTURE_REPO
    if "/" not in token and token.removesuffix(".py") in LAB_MODULES | code_module_names():
        return CODE_DIR
    return None


PATH_TOKEN = re.compile(r"^[\w.\-/*]+?(?::(\d+)(?:-(\d+))?)?$")


def check_path_token(token: str) -> str | None:
    """None if the token is fine (or not a repo path); otherwise what is wrong."""
    if any(c in token for c in " <>{}\\$") or "://" in token or token in LEARNER_CREATED:
        return None
    m = PATH_TOKEN.match(token)
    if not m:
        return None
    path = token.split(":", 1)[0]
    looks_like_path = "/" in path or re.search(r"\.(py|md|txt|ini|json|jsonl|toml|cfg|example)$", path)
    if not looks_like_path:
        return None
    base = _path_base(path)
    if base is None:
        return None
    if "*" in path:
        return None if list(base.glob(path.rstrip("/"))) else f"`{token}` matches no file"
    target = base / path.rstrip("/")
    if not target.exists():
        return f"`{token}` does not exist (looked in {where_is(base)})"
    if m.group(1):
        if not target.is_file():
            return f"`{token}` cites a line of something that is not a file"
        count = len(target.read_text(encoding="utf-8").splitlines())
        last = int(m.group(2) or m.group(1))
        if not 1 <= int(m.group(1)) <= last <= count:
            return f"`{token}` cites line {last}, but {path} has {count} lines"
    return None


def where_is(folder: Path) -> str:
    rel = folder.relative_to(REPO_ROOT).as_posix()
    return "the repository root" if rel == "." else f"{rel}/"


def test_backticked_paths_exist():
    problems = []
    for d in DOCS:
        for number, line in enumerate(d.prose, 1):
            for token in code_spans(line):
                problem = check_path_token(token)
                if problem:
                    problems.append(f"{d.rel}:{number}: {problem}")
    assert not problems, problems_message(problems, "backticked paths that do not exist")


def guiding_test_names() -> dict[str, set[str]]:
    """{'code/tests/test_m1_sandbox.py': {'test_...', ...}} for every guiding test file."""
    out = {}
    for path in sorted((CODE_DIR / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out[path.relative_to(REPO_ROOT).as_posix()] = {
            n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    return out


def test_backticked_test_names_exist():
    """`code/tests/test_m4_loop.py::test_x`, a following `::test_y`, and a bare `test_z` are real tests."""
    tests = guiding_test_names()
    every = set().union(*tests.values()) if tests else set()
    problems = []
    for d in DOCS:
        current = None  # the test file a `::name` continues from
        for number, line in enumerate(d.prose, 1):
            for token in code_spans(line):
                m = re.fullmatch(r"((?:code/)?tests/test_\w+\.py)?::(test_\w+)|(test_\w+)", token)
                if not m:
                    continue
                file, name, bare = m.groups()
                if file:
                    current = file if file.startswith("code/") else f"code/{file}"
                where = f"{d.rel}:{number}"
                if bare:
                    if bare not in every and not (CODE_DIR / "tests" / f"{bare}.py").exists():
                        problems.append(f"{where}: `{bare}` is not a test in code/tests/")
                elif current is None:
                    problems.append(f"{where}: `::{name}` does not follow a test file name")
                elif current not in tests:
                    problems.append(f"{where}: {current} does not exist")
                elif name not in tests[current]:
                    problems.append(f"{where}: {current} has no test {name}")
    assert not problems, problems_message(problems, "test names that do not exist")


# --------------------------------------------------------------------------- module.name references

def code_module_names() -> set[str]:
    return {p.stem for p in CODE_DIR.glob("*.py")}


def top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def test_backticked_module_names_exist():
    modules = LAB_MODULES | code_module_names()
    pattern = re.compile(r"(?<![\w./])(" + "|".join(sorted(modules)) + r")\.([A-Za-z_]\w*)")
    cache: dict[str, set[str] | None] = {}
    problems = []
    for d in DOCS:
        for number, line in enumerate(d.prose, 1):
            for span in code_spans(line):
                for module, name in pattern.findall(span):
                    if name in FILE_SUFFIXES:  # a file name such as tools.py, not an attribute
                        continue
                    if module not in cache:
                        source = CODE_DIR / f"{module}.py"
                        cache[module] = top_level_names(source) if source.exists() else None
                    names = cache[module]
                    if names is None:
                        problems.append(f"{d.rel}:{number}: `{module}.{name}`: code/{module}.py does not exist")
                    elif name not in names:
                        problems.append(f"{d.rel}:{number}: `{module}.{name}`: code/{module}.py has no top-level {name}")
    assert not problems, problems_message(problems, "references to names that do not exist")


# --------------------------------------------------------------------------- milestone list

def test_every_document_lists_the_same_milestones():
    titles = {m.id: m.title for m in ALL}
    mentioned = re.compile(r"\b([MS]\d+)(?::\s+| \((?=[A-Z]))")  # "M1: Sandbox paths", "M1 (Sandbox paths)"
    problems = []
    for rel in MILESTONE_DOCS:
        d = doc(rel)
        text = "\n".join(d.prose)
        for m in MILESTONES:
            if f"{m.id}: {m.title}" not in text:
                problems.append(f"{rel}: never writes '{m.id}: {m.title}' (harness/milestones.py)")
        for number, line in enumerate(d.prose, 1):
            for hit in mentioned.finditer(line):
                mid = hit.group(1)
                if mid not in titles:
                    if mid.startswith("M"):
                        problems.append(f"{rel}:{number}: {mid} is not a milestone in harness/milestones.py")
                    continue  # stretch ids are checked once harness/milestones.py names them
                rest = line[hit.end():]
                title = titles[mid]
                after = rest[len(title):]
                ok = rest.startswith(title) and not re.match(r"[\w]|\s+[a-z]", after)
                if not ok:
                    problems.append(f"{rel}:{number}: {mid} is titled {rest[:len(title) + 12]!r}..., "
                                    f"but harness/milestones.py calls it {title!r}")
    assert not problems, problems_message(problems, "milestone list mismatches")


# --------------------------------------------------------------------------- lesson pointers

def lesson_sections() -> dict[int, dict]:
    """{N: {"title", "headings": [### texts], "rows": [first table cells], "line"}} of the lesson."""
    sections: dict[int, dict] = {}
    current = None
    for number, line in enumerate(read_doc(LESSON).prose, 1):
        m = re.match(r"^## Section (\d+): (.+?)\s*$", line)
        if m:
            current = sections[int(m.group(1))] = {"title": m.group(2), "headings": [], "rows": [], "line": number}
            continue
        if line.startswith("## "):
            current = None
        elif current is not None and line.startswith("### "):
            current["headings"].append(line[4:].strip())
        elif current is not None and line.startswith("|") and not re.match(r"^\|[\s|:-]+\|?\s*$", line):
            current["rows"].append(line.strip("|").split("|")[0].strip().strip("`"))
    for s in sections.values():
        s["rows"] = s["rows"][1:] if s["rows"] else []  # the header row is not a data row
    return sections


def pointer_problems(pointer: str, sections: dict[int, dict]) -> list[str]:
    """Check a pointer like 'Section 3, How It Works, and Section 4, Example 3'."""
    parts = re.split(r"\bSection (\d+)", pointer)
    if len(parts) < 2:
        return [f"{pointer!r} names no section"]
    problems = []
    for number, tail in zip(parts[1::2], parts[2::2]):
        section = sections.get(int(number))
        if section is None:
            problems.append(f"{pointer!r}: the lesson has no '## Section {number}: ...' heading")
            continue
        tail = tail.strip()
        if tail.startswith(":"):
            title, _, tail = tail[1:].partition(",")
            if title.strip() != section["title"]:
                problems.append(f"{pointer!r}: Section {number} is titled {section['title']!r}, not {title.strip()!r}")
        for item in (i.strip() for i in tail.split(",")):
            item = re.sub(r"^and\b", "", item).strip().strip("()").strip()
            if not item:
                continue
            if item == "first row":
                ok = bool(section["rows"])
            elif item[0] in "'\"":
                ok = any(row.startswith(item.strip("'\"")) for row in section["rows"])
            elif item.startswith("Example "):
                ok = any(re.match(re.escape(item) + r"\b", h) for h in section["headings"])
            else:
                ok = item == section["title"] or any(h.startswith(item) for h in section["headings"])
            if not ok:
                problems.append(f"{pointer!r}: Section {number} ({section['title']}) has no heading or "
                                f"table row {item!r}")
    return problems


def pointers_in_code() -> list[tuple[str, str]]:
    """(where, pointer) for every lesson reference in the tests, the harness and the lab modules."""
    found = []
    files = [p for p in CODE_DIR.rglob("*.py") if "fixture_repo" not in p.parts and "bench" not in p.parts]
    files += sorted(REFERENCE_DIR.glob("*.py"))
    for path in files:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(REPO_ROOT).as_posix()
        for m in re.finditer(r"lesson/lesson\.agent\.md,\s*\"([^\"]+)\"(?:\s*\(([^)]+)\))?", text):
            found.append((where, m.group(1) + (f", {m.group(2)}" if m.group(2) else "")))
        for m in re.finditer(r"\(lesson: (Section [^)]*)\)", text):
            found.append((where, m.group(1)))
    return found


def test_failure_messages_point_at_real_lesson_sections():
    sections = lesson_sections()
    assert set(sections) == set(range(1, 11)), (
        f"lesson/lesson.agent.md should have '## Section 1: ...' to '## Section 10: ...'; found {sorted(sections)}")
    problems = []
    for m in ALL:
        path, _, pointer = m.section.partition(", ")
        if not (REPO_ROOT / path).is_file():
            problems.append(f"harness/milestones.py {m.id}: {path} does not exist")
        problems += [f"harness/milestones.py {m.id}: {p}" for p in pointer_problems(pointer, sections)]
    for where, pointer in pointers_in_code():
        problems += [f"{where}: {p}" for p in pointer_problems(pointer, sections)]
    assert not problems, problems_message(problems, "lesson pointers that lead nowhere")


def test_pointer_checker_rejects_a_wrong_pointer():
    """The pointer check itself can fail (so a green result above means something)."""
    sections = lesson_sections()
    assert pointer_problems("Section 4, Example 9", sections)
    assert pointer_problems("Section 9, 'No such mistake'", sections)
    assert pointer_problems("Section 3, How It Does Not Work", sections)
    assert not pointer_problems("Section 9, 'Tool results without the assistant turn'", sections)


# --------------------------------------------------------------------------- the guided examples

def guided_examples() -> list[tuple[int, str, str]]:
    """(line, code, expected output) for each python block followed by an 'Output:' text block."""
    d = read_doc(LESSON)
    examples = []
    for block, following in zip(d.blocks, d.blocks[1:]):
        between = "\n".join(d.prose[block.line + len(block.lines):following.line - 1])
        if block.lang == "python" and following.lang == "text" and between.strip() == "Output:":
            examples.append((block.line, "\n".join(block.lines) + "\n", "\n".join(following.lines) + "\n"))
    return examples


def test_section_4_has_three_runnable_examples():
    lines = [line for line, _, _ in guided_examples()]
    sections = lesson_sections()
    inside = [n for n in lines if sections[4]["line"] < n < sections[5]["line"]]
    assert len(inside) == 3, f"lesson Section 4 should hold 3 python examples with 'Output:' blocks; found lines {lines}"


@pytest.mark.skipif(sys.platform == "win32", reason="the examples print POSIX paths")
@pytest.mark.parametrize("line,code,expected", guided_examples(), ids=lambda v: f"line{v}" if isinstance(v, int) else "")
def test_guided_example_prints_what_the_lesson_shows(line, code, expected):
    prelude = f"import sys; sys.path.insert(0, {str(REFERENCE_DIR)!r})\n"
    proc = subprocess.run([sys.executable, "-c", prelude + code], cwd=CODE_DIR, capture_output=True,
                          text=True, timeout=60, env=offline_env())
    assert proc.returncode == 0, f"lesson/lesson.agent.md:{line}: the example raised:\n{proc.stderr[-2000:]}"
    assert proc.stdout == expected, (
        f"lesson/lesson.agent.md:{line}: the example prints something else than the lesson shows.\n"
        f"--- lesson ---\n{expected}--- reference prints ---\n{proc.stdout}")


# --------------------------------------------------------------------------- shell commands

@dataclass(frozen=True)
class Command:
    where: str          # "README.md:42"
    text: str           # as written, e.g. python -m pytest --hint M2:2
    cwd: Path


def commands_in(rel: str, start: Path) -> list[Command]:
    d = doc(rel)
    found = []
    for block in d.blocks:
        if block.lang not in SHELL_LANGS:
            continue
        cwd = start
        for offset, raw in enumerate(block.lines):
            line = raw.strip().removeprefix("$ ")
            line = re.sub(r"\s+#\s.*$", "", line)  # trailing comment
            if line.startswith("cd "):
                cwd = (cwd / line[3:].strip()).resolve()
            elif line.startswith("python "):
                found.append(Command(f"{rel}:{block.line + offset}", line, cwd))
    for number, line in enumerate(d.prose, 1):
        for span in code_spans(line):
            if span.startswith("python "):
                script = span.split()[1]
                cwd = CODE_DIR if script.endswith(".py") and (CODE_DIR / script).exists() else start
                found.append(Command(f"{rel}:{number}", span, cwd))
    return found


def all_commands() -> list[Command]:
    return [c for rel, start in COMMAND_DOCS.items() for c in commands_in(rel, start)]


def is_maintainer_command(text: str) -> bool:
    return "rubric/checks" in text


# The M6 scripts run offline (a scripted model) unless given --model.
OFFLINE_SCRIPTS = ("break_and_observe.py", "evaluate.py")


def runs_offline(text: str) -> bool:
    """Commands that need no model, no key and no network (and are not the maintainer command)."""
    args = text.split()
    if is_maintainer_command(text) or args[:1] != ["python"]:
        return False
    if args[1:3] == ["-m", "pytest"]:
        return "live" not in args  # `-m live` calls the learner's provider
    if args[1] in OFFLINE_SCRIPTS and "--model" not in args:
        return True
    return any(flag in args for flag in ("--help", "--context-only", "--simulate"))


def runs_learner_code(args: list[str]) -> bool:
    """A script run on the learner's own functions (which are stubs in this repository)."""
    return args[1] in OFFLINE_SCRIPTS and not {"--simulate", "--reference", "--help"} & set(args)


def offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LESSON06_IMPL"}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true", SUBPROCESS_FLAG: "1"})
    # Real environment variables beat code/.env: blank every provider setting so nothing goes online.
    for name in ("GROQ_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
                 "COPILOT_MODEL", "COPILOT_API_BASE", "COPILOT_API_KEY", "EMBEDDING_MODEL", "EMBEDDING_API_BASE"):
        env[name] = ""
    return env


# Pytest options whose whole-suite run other course checks already make (the maintainer command runs
# everything on the reference; test_course.py runs --unlock-all on the stubs, from both folders).
COLLECT_ONLY_FLAGS = ("--reference", "--unlock-all")


@dataclass
class Run:
    """One process to start: the documented command(s) it stands for, and what it must show."""

    argv: list[str]             # after "python"
    cwd: Path
    codes: set[int]
    needle: str
    shown: list[Command]


def is_pytest(args: list[str]) -> bool:
    return args[1:3] == ["-m", "pytest"]


def path_args(args: list[str]) -> list[str]:
    return [a for a in args[3:] if not a.startswith("-") and ("/" in a or a.endswith(".py"))]


def plan_runs(commands: list[Command]) -> tuple[list[Run], list[str]]:
    """Group the documented offline commands into as few processes as keep every claim checked.

    - `--hint` and `--help` variants run as shown (once per distinct argument list);
    - plain learner runs (`python -m pytest`, `--stretch`) run in full, once per folder: on the
      shipped stubs they must exit 1 and print the board;
    - runs that select files or use --reference/--unlock-all are collected (not run) in one batch
      per folder after their paths are checked: their full runs are made by the other course checks;
    - the lab's scripts run as shown, once per folder.
    """
    runs: dict[tuple, Run] = {}
    problems: list[str] = []
    batch: dict[Path, Run] = {}
    for c in commands:
        args = shlex.split(c.text)
        if not is_pytest(args):
            key = (c.text, c.cwd)
            codes, needle = {0}, ""
            if "--help" in args:
                needle = "usage:"
            elif runs_learner_code(args):
                codes, needle = {2}, "is not done yet"  # on the stubs: one line naming the milestone
            runs.setdefault(key, Run(args[1:], c.cwd, codes, needle, [])).shown.append(c)
        elif any(a == "--hint" or a.startswith("--hint=") for a in args) or "--help" in args:
            needle = "Lesson 06 milestones" if "--help" in args else "Hint 1 of 3"
            runs.setdefault((tuple(args),), Run(args[1:], c.cwd, {0}, needle, [])).shown.append(c)
        elif path_args(args) or any(flag in args for flag in COLLECT_ONLY_FLAGS):
            for pattern in path_args(args):
                if not list(c.cwd.glob(pattern)):
                    problems.append(f"{c.where}: `{c.text}`: {pattern} matches nothing in {where_is(c.cwd)}")
            run = batch.setdefault(c.cwd, Run(["-m", "pytest", "--collect-only"], c.cwd, {0}, "collected", []))
            run.argv += [a for a in args[3:] if a not in run.argv]
            run.shown.append(c)
        else:
            runs.setdefault((tuple(args), c.cwd), Run(args[1:], c.cwd, {1}, "Lesson 06 milestones", [])).shown.append(c)
    return [*runs.values(), *batch.values()], problems


def execute(run: Run, cache_dir: str) -> str | None:
    argv = [sys.executable]
    for arg in run.argv:
        argv += sorted(str(p) for p in run.cwd.glob(arg)) or [arg] if "*" in arg else [arg]
    env = offline_env()
    env["PYTEST_ADDOPTS"] = f"-o cache_dir={cache_dir}"  # leave the learner's "current milestone" alone
    label = "; ".join(f"{c.where}: `{c.text}`" for c in run.shown[:6])
    try:
        proc = subprocess.run(argv, cwd=run.cwd, env=env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"{label} (in {where_is(run.cwd)}): did not finish in 120 s"
    out = proc.stdout + proc.stderr
    wrong = []
    if proc.returncode not in run.codes:
        wrong.append(f"exit code {proc.returncode}, expected {sorted(run.codes)}")
    if run.needle and run.needle not in out:
        wrong.append(f"output lacks {run.needle!r}")
    if "Traceback (most recent call last)" in out or "INTERNALERROR" in out:
        wrong.append("it printed a traceback")
    if not out.strip():
        wrong.append("it printed nothing")
    if not wrong:
        return None
    tail = "\n      ".join(out.strip().splitlines()[-12:])
    return f"{label} (in {where_is(run.cwd)}, ran: python {' '.join(run.argv)}): {'; '.join(wrong)}\n      {tail}"


def offline_commands() -> list[Command]:
    return [c for c in all_commands() if runs_offline(c.text)]


def test_documents_show_shell_commands():
    commands = all_commands()
    assert offline_commands(), "no offline command found in the READMEs and PROJECT.md"
    for rel in COMMAND_DOCS:
        assert any(c.where.startswith(rel + ":") for c in commands), f"{rel} shows no python command"


def test_every_offline_command_is_planned():
    runs, _ = plan_runs(offline_commands())
    planned = {(c.where, c.text) for r in runs for c in r.shown}
    missing = [f"{c.where}: `{c.text}`" for c in offline_commands() if (c.where, c.text) not in planned]
    assert not missing, problems_message(missing, "documented commands that no run covers")


@pytest.mark.skipif(os.environ.get(SUBPROCESS_FLAG) == "1", reason="already inside a documentation command")
def test_shown_offline_commands_run():
    runs, problems = plan_runs(offline_commands())
    with tempfile.TemporaryDirectory() as cache_dir, ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        problems += [r for r in pool.map(lambda run: execute(run, cache_dir), runs) if r]
    assert not problems, problems_message(problems, "documented commands that do not do what the text says")


def test_maintainer_command_is_the_one_ci_runs():
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    m = re.search(r"\"\$venv/bin/python\" (-m pytest[^|\n]*?)\s*(?:\|\||$)", ci, re.M)
    assert m, ".ci/run: no `\"$venv/bin/python\" -m pytest ...` line found"
    expected = f"python {m.group(1).strip()}"
    shown = [c.text for c in commands_in("README.md", REPO_ROOT) if is_maintainer_command(c.text)]
    assert shown == [expected], f"README.md 'For maintainers' should show `{expected}` (from .ci/run); it shows {shown}"


# --------------------------------------------------------------------------- line references (issue 27)

# `file.py:N` and `file.py:A-B` in the documents a learner reads. Line numbers drift with every
# edit, so each reference must carry the name it points at: a code-like word (a backticked word,
# a dotted or snake_case name, an UPPER_CASE constant, a call) in its own stretch of the line must
# appear on the cited lines. A reference repeated without such a word (a citation list under an
# answer) must be checked where it first carries one.
LINE_REF_DOCS = ("lesson/lesson.md", "lesson/lesson.agent.md", "README.md", "PROJECT.md", "code/README.md")
LINE_REF_BODY = r"((?:[\w.-]+/)*[\w-]+\.(?:py|md)):(\d+)(?:[-\u2013](\d+))?(?!\d)"
LINE_REF = re.compile(r"(?<![\w/.-])" + LINE_REF_BODY)


def code_words(window: str) -> set[str]:
    words = set()
    for span in re.findall(r"`([^`]+)`", window):
        words |= set(re.findall(r"[A-Za-z_][\w.]*\w", span))
    for m in re.finditer(r"([A-Za-z_][\w.]*\w)(\()?", window):
        word = m.group(1).strip(".")
        if "_" in word or "." in word or (word.isupper() and len(word) > 2) or m.group(2):
            words.add(word)
    return {w for w in words if len(w) > 2}


def cited_files(name: str) -> list[Path]:
    """Where a reference's file may live: the fixture repository (shop/...), code/ (the copilot's
    own questions run there), the repository root."""
    return [base / name for base in (FIXTURE_REPO, CODE_DIR, REPO_ROOT) if (base / name).is_file()]


def line_reference_problems(rel: str, lines: list[str]) -> list[str]:
    problems, carried, bare = [], set(), []
    for number, line in enumerate(lines, 1):
        line = re.sub("`(" + LINE_REF_BODY + ")`", r"\1", line)  # `config.py:42` reads as config.py:42
        refs = list(LINE_REF.finditer(line))
        for i, ref in enumerate(refs):
            name, first, last = ref[1], int(ref[2]), int(ref[3] or ref[2])
            key = (name, first, last)
            start = refs[i - 1].end() if i else 0
            end = refs[i + 1].start() if i + 1 < len(refs) else len(line)
            words = code_words(line[start:ref.start()] + " " + line[ref.end():end])
            named = re.search(r"([A-Za-z_]\w{2,})\s*\($", line[start:ref.start()])  # "defines price (ref)"
            if named and words:  # beside other names only: "(config.py:43 was grounded ...)" names nothing
                words.add(named[1])
            files = cited_files(name)
            where = f"{rel}:{number}: {ref[0]}"
            if not files:
                problems.append(f"{where} names a file found nowhere (fixture repository, code/, root)")
                continue
            if not words:
                bare.append((key, where))
                continue
            shown = []
            for path in files:
                cited = path.read_text(encoding="utf-8").splitlines()[first - 1:last]
                text = "\n".join(cited)
                shown.append(f"{path.relative_to(REPO_ROOT).as_posix()}:{first}-{last} holds {text[:160]!r}")
                if len(cited) == last - first + 1 and any(
                        re.search(rf"(?<![\w]){re.escape(w)}(?![\w])", text) for w in words):
                    carried.add(key)
                    break
            else:
                problems.append(f"{where} is next to {sorted(words)}, none of which is on the cited lines "
                                f"({'; '.join(shown)}): the lines moved, or the reference is wrong")
    for key, where in bare:
        if key not in carried:
            problems.append(f"{where} carries no name to check it by (write the name it points at next to it)")
    return problems


def test_line_references_point_at_what_they_name():
    """Every `file.py:N` in the learner's documents lands on a line holding the name written beside it."""
    problems = []
    for rel in LINE_REF_DOCS:
        problems += line_reference_problems(rel, (REPO_ROOT / rel).read_text(encoding="utf-8").splitlines())
    assert not problems, problems_message(problems, "line references that do not point at what they name")


def test_line_reference_check_catches_a_drifted_line():
    """The check itself, tried on the mistakes it must catch: a reference that drifted off its name, a
    bare repeat of nothing, a file that does not exist; and the right lines pass."""
    right = config_line = next(i for i, line in enumerate(
        (CODE_DIR / "config.py").read_text(encoding="utf-8").splitlines(), 1) if line.startswith("PROVIDER_DEFAULTS"))
    assert line_reference_problems("x.md", [f"`PROVIDER_DEFAULTS` is defined at config.py:{right}."]) == []
    assert line_reference_problems("x.md", [f"`PROVIDER_DEFAULTS` is defined at config.py:{config_line - 2}."])
    assert line_reference_problems("x.md", ["See config.py:3 for details."])
    assert line_reference_problems("x.md", ["`PROVIDER_DEFAULTS` (no_such_module.py:3)"])
    assert line_reference_problems("x.md", [f"`PROVIDER_DEFAULTS` (config.py:{right})", f"config.py:{right}"]) == []


NUMBER_WORDS = {"five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def test_the_documents_count_the_reflection_as_the_board_does():
    """'the seven questions' are UNDERSTANDING.md's numbered questions; 'eight answers' is what the
    board counts (the questions plus the StarcallOS reflection)."""
    from harness import progress

    text = progress.UNDERSTANDING.read_text(encoding="utf-8")
    questions = len(re.findall(r"(?m)^## \d+\.", text))
    answers = progress.answers(progress.UNDERSTANDING)[1]
    problems = []
    for rel in LINE_REF_DOCS:
        flat = " ".join((REPO_ROOT / rel).read_text(encoding="utf-8").split())
        for word, kind in re.findall(r"\b(\w+) (?:reflection )?(questions|answers)\b", flat):
            said = NUMBER_WORDS.get(word.lower())
            wanted = questions if kind == "questions" else answers
            if said is not None and said != wanted:
                problems.append(f"{rel}: '{word} {kind}', but UNDERSTANDING.md has {wanted} {kind} (the board counts "
                                f"{answers} answers: {questions} questions and the StarcallOS reflection)")
        for sentence in re.split(r"(?<=[.!?])\s+", flat):  # "answer the seven questions": and the eighth?
            counted = re.search(r"\b(\w+) (?:reflection )?questions\b", sentence)
            if "UNDERSTANDING.md" in sentence and counted and counted[1].lower() in NUMBER_WORDS \
                    and "StarcallOS" not in sentence:
                problems.append(f"{rel}: {sentence[:140]!r} leaves out the StarcallOS reflection the board counts")
    assert not problems, problems_message(problems, "counts that disagree with UNDERSTANDING.md")


def test_the_earlier_projects_are_named_one_way():
    """One reading of the specification's project list: Project 02 is cosine similarity, Projects 03/04
    are embeddings and top-k retrieval (never 'Project 03' alone for either)."""
    problems = []
    for rel in LINE_REF_DOCS:
        flat = " ".join((REPO_ROOT / rel).read_text(encoding="utf-8").split())
        for sentence in re.split(r"(?<=[.!?])\s+", flat):
            if re.search(r"Project 0?3(?!/0?4)(?!\d)", sentence) and "03/04" not in sentence:
                problems.append(f"{rel}: Project 03 alone: {sentence[:160]!r}")
            if re.search(r"Project 0?2\b", sentence) and "cosine" not in sentence:
                problems.append(f"{rel}: Project 02 named for something other than cosine similarity: {sentence[:160]!r}")
    assert not problems, problems_message(problems, "mentions of earlier projects that read the list another way")
