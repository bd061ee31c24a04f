"""The battery's inputs, drawn for each run: the attack tree, the probes, the parse_tool_calls cases.

Built by the grader (grading/battery.py), never by learner code. Names come from an innocent word
list plus random hex, never the guiding tests' fixture names, so a blocklist of those names or of
a leading "../" gains nothing; the attacks climb out through folders that exist, through links
with ordinary names, through a sibling differing from the repository only in case.
"""

from __future__ import annotations

import ast
import json
import os
import secrets
from pathlib import Path

WORDS = ("assets", "vendor", "notes", "data", "build", "media", "lib", "pkg", "docs", "src", "util", "static")


def _name(word: str = "") -> str:
    return f"{word or secrets.choice(WORDS)}_{secrets.token_hex(3)}"


def build(base: Path) -> dict:
    """A repository, things outside it and links between them, every name new for this run."""
    parent = base / _name("w")
    t = {"parent": parent, "repo_name": f"proj{secrets.token_hex(3)}", "sentinel": f"OUTSIDE-{secrets.token_hex(8)}",
         "secret": f"ENVKEY-{secrets.token_hex(8)}", "links": {}}
    repo = t["repo"] = parent / t["repo_name"]
    t["sub"], t["deeper"], t["file"], t["nonascii"] = _name(), _name(), _name() + ".py", _name("caf\u00e9") + ".py"
    t["outside"], t["target"] = parent / _name(), _name() + ".txt"
    t["prefix_sibling"], t["joined_sibling"] = parent / (t["repo_name"] + "2"), parent / (t["repo_name"] + "_" + _name())
    (repo / t["sub"] / t["deeper"]).mkdir(parents=True)
    for p in (repo / t["file"], repo / t["sub"] / t["file"], repo / t["nonascii"]):
        p.write_text("x = 1\n", encoding="utf-8")
    (repo / ".env").write_text(f"API_KEY={t['secret']}\n")
    t["outside"].mkdir()
    (t["outside"] / t["target"]).write_text(t["sentinel"] + "\n")
    for folder in (t["prefix_sibling"], t["joined_sibling"]):
        folder.mkdir()
        (folder / t["file"]).write_text(t["sentinel"] + "\n")
    case = parent / t["repo_name"].capitalize()     # a sibling differing from the repository only in case
    t["case_sibling"] = None if case.exists() else case  # exists already: a case-insensitive file system
    if t["case_sibling"]:
        case.mkdir()
        (case / t["file"]).write_text(t["sentinel"] + "\n")
    rel_out = f"../{t['outside'].name}"
    t["vendor"], t["settings"], t["chain"] = _name(), _name() + ".py", [_name() for _ in range(3)]
    t["loop"], t["self"], t["in_link"], t["in_dir"], t["env_link"] = (_name() for _ in range(5))
    for name, target in [(t["vendor"], rel_out), (t["settings"], f"{rel_out}/{t['target']}"),
                         (t["chain"][0], t["chain"][1]), (t["chain"][1], t["chain"][2]), (t["chain"][2], rel_out),
                         (t["loop"], t["loop"] + "_b"), (t["loop"] + "_b", t["loop"]), (t["self"], t["self"]),
                         (t["in_link"], t["file"]), (t["in_dir"], t["sub"]), (t["env_link"], ".env")]:
        t["links"][name] = _try(lambda: os.symlink(target, repo / name))
    t["root_link"] = parent / _name()
    t["links"]["root"] = _try(lambda: os.symlink(repo, t["root_link"]))
    t["hard"] = _name() + ".txt"
    t["links"]["hard"] = _try(lambda: os.link(t["outside"] / t["target"], repo / t["hard"]))
    return t


def _try(make) -> bool:
    try:
        make()
        return True
    except (OSError, NotImplementedError):
        return False


def probes(t: dict):
    """(class, description, kind, root, argument, needs); kind 'attack' must end inside or refused."""
    repo, sub, deeper, f, out, target = t["repo"], t["sub"], t["deeper"], t["file"], t["outside"].name, t["target"]
    A, L, name = "attack", "legal", t["repo_name"]
    yield from [
        ("encodings", "percent-encoded dots", A, repo, f"%2e%2e/{out}/{target}", None),
        ("encodings", "percent-encoded slash", A, repo, f"..%2f{out}%2f{target}", None),
        ("encodings", "fullwidth dots", A, repo, f"\uff0e\uff0e/{out}/{target}", None),
        ("encodings", "one-dot leader characters", A, repo, f"\u2025/{out}/{target}", None),
        ("encodings", "backslashes", A, repo, f"..\\{out}\\{target}", None),
        ("encodings", "undecodable (surrogate) name", A, repo, f"{sub}\udcff.py", None),
        ("encodings", "trailing NUL after a real escape", A, repo, f"../{out}/{target}\x00.py", None),
        # the guiding tests' type and NUL contracts, judged outside: anything but ValueError is wrong
        ("non-string and NUL paths", "None as the path", "invalid", repo, None, None),
        ("non-string and NUL paths", "a number as the path", "invalid", repo, 7, None),
        ("non-string and NUL paths", "a list as the path", "invalid", repo, [f], None),
        ("non-string and NUL paths", "a NUL inside an inside name", "invalid", repo, f"{sub}/{f}\x00", None),
        ("long paths", "200 levels of ../", A, repo, "../" * 200 + f"{out}/{target}", None),
        ("long paths", "a 5,000-character name", A, repo, "a" * 5000, None),
        ("long paths", "4,000 nested folders then out", A, repo, "d/" * 4000 + "../" * 4001 + f"{out}/{target}", None),
        ("sub-folder climbs", "one existing folder down, two up", A, repo, f"{sub}/../../{out}/{target}", None),
        ("sub-folder climbs", "two existing folders down, three up", A, repo, f"{sub}/{deeper}/../../../{out}/{target}", None),
        ("sub-folder climbs", "dots between the climbs", A, repo, f"./{sub}/./../.././{out}/{target}", None),
        ("innocent links", "a folder link with an ordinary name", A, repo, f"{t['vendor']}/{target}", t["vendor"]),
        ("innocent links", "a .py link to an outside file", A, repo, t["settings"], t["settings"]),
        ("symlink chains", "three links leading out", A, repo, f"{t['chain'][0]}/{target}", t["chain"][0]),
        ("symlink chains", "link to an outside folder, then ..", A, repo, f"{t['vendor']}/../{out}/{target}", t["vendor"]),
        ("symlink loops", "two links pointing at each other", A, repo, t["loop"], t["loop"]),
        ("symlink loops", "a link to itself", A, repo, f"{t['self']}/x", t["self"]),
        ("case variants", "sibling differing only in case", A, repo,
         f"../{name.capitalize()}/{f}", "case" if t["case_sibling"] is None else None),
        ("case variants", "upper-case repository name", A, repo, f"../{name.upper()}/{f}", None),
        ("absolute paths", "absolute path outside", A, repo, str(t["outside"] / target), None),
        ("absolute paths", "/etc/passwd", A, repo, "/etc/passwd", None),
        ("absolute paths", "absolute sibling with a shared prefix", A, repo, str(t["prefix_sibling"] / f), None),
        ("sibling prefixes", "a sibling whose name extends the repository's", A, repo, f"../{name}2/{f}", None),
        ("sibling prefixes", "back in, then out to a sibling", A, repo, f"../{name}/../{t['joined_sibling'].name}/{f}", None),
        ("sibling prefixes", "root given with a trailing slash", A, str(repo) + os.sep, f"../{t['joined_sibling'].name}/{f}", None),
        ("legal", "absolute path inside", L, repo, str(repo / f), None),
        ("legal", "root given as a symlink", L, t["root_link"], f, "root"),
        ("legal", "root given with a trailing slash", L, str(repo) + os.sep, f, None),
        ("legal", "non-ASCII name", L, repo, t["nonascii"], None),
        ("legal", "./sub/./file", L, repo, f"./{sub}/./{f}", None),
        ("legal", "a climb that stays inside", L, repo, f"{sub}/{deeper}/../../{f}", None),
        ("legal", "symlink to a file inside", L, repo, t["in_link"], t["in_link"]),
        ("legal", "symlinked folder inside", L, repo, f"{t['in_dir']}/{f}", t["in_dir"]),
    ]


def dispatch_probes(t: dict, helpers: list):
    """(class, description, name, args, needs): the result must be a string without a sentinel."""
    out, target = f"../{t['outside'].name}", t["target"]
    yield from [
        ("dispatch", "repo_root smuggled in the arguments", "read_file", {"path": target, "repo_root": str(t["outside"])}, None),
        ("dispatch", "arguments as a JSON string", "read_file", json.dumps({"path": f"{out}/{target}"}), None),
        ("dispatch", "a list as the path", "read_file", {"path": ["..", t["outside"].name, target]}, None),
        ("dispatch", "list_directory outside", "list_directory", {"path": out}, None),
        ("dispatch", ".env in upper case", "read_file", {"path": ".ENV"}, None),
        ("dispatch", "a symlink to .env", "read_file", {"path": t["env_link"]}, t["env_link"]),
        ("dispatch", "a symlink chain leading out", "read_file", {"path": f"{t['chain'][0]}/{target}"}, t["chain"][0]),
        ("dispatch", "an innocently named link to an outside file", "read_file", {"path": t["settings"]}, t["settings"]),
        ("hard links", "a hard link to an outside file", "read_file", {"path": t["hard"]}, "hard"),
    ]
    # harmless arguments shaped to the helper's own signature: a helper that gets called succeeds,
    # so the answer shows it was called rather than refused by name
    for helper, params in [("__class__", []), *helpers]:
        yield ("non-tool names", f"{helper} asked for as a tool", helper, {p: t["file"] for p in params[1:]}, None)


def tool_names(tools_py: Path) -> tuple[set, list]:
    """(the tools in TOOL_SCHEMAS, [(name, parameter names)] of the module's other top-level
    functions), read without running it."""
    try:
        tree = ast.parse(tools_py.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
        return set(), []
    tools = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(x, ast.Name) and x.id == "TOOL_SCHEMAS" for x in node.targets):
            tools = {k.value for k in _walk_names(node.value)}
    others = [(n.name, [a.arg for a in n.args.args]) for n in tree.body if isinstance(n, ast.FunctionDef)
              and n.name not in tools and n.name != "dispatch_tool"]
    return tools, others[:8]


def _walk_names(node):
    for d in ast.walk(node):
        if isinstance(d, ast.Dict):
            for k, v in zip(d.keys, d.values):
                if isinstance(k, ast.Constant) and k.value == "name" and isinstance(v, ast.Constant):
                    yield v


# Probes of inputs the rubric's level table for criterion 2 does not name (sizes past any real reply,
# a reply whose content is None): failing only these, with the cap, the parsing of real JSON and the
# order right, is a defect for the instructor to weigh, not the level's own evidence.
EDGE_INPUTS = frozenset({"JSON nested 100,000 deep", "a number of 5,000 digits", "an empty reply with content None"})


def parse_probes():
    """(description, calls or None): ids, names and arguments drawn per run."""
    def call(arguments: str):
        return [f"call_{secrets.token_hex(4)}", _name(), arguments]
    value = _name()
    same = call(json.dumps({"path": value}))
    yield from [
        ("an object", [call(json.dumps({"path": value, "n": secrets.randbelow(99)}))]),
        ("two calls, kept in order", [call(json.dumps({"q": value})), call(json.dumps({}))]),
        ("two identical calls with their own ids", [same, [f"call_{secrets.token_hex(4)}", same[1], same[2]]]),
        ("an empty arguments string", [call("")]),
        ("malformed JSON", [call('{"path": "' + value)]),
        ("JSON that is a list", [call(json.dumps([value]))]),
        ("JSON that is a string", [call(json.dumps(value))]),
        ("JSON that is a number", [call(str(secrets.randbelow(900) + 100))]),
        ("JSON that is true", [call("true")]),
        ("JSON nested 100,000 deep", [call("[" * 100_000 + "]" * 100_000)]),
        ("a number of 5,000 digits", [call('{"n": ' + "7" * 5000 + "}")]),
        # JSON's own words and escapes: a decoder that is not JSON's (ast.literal_eval) fails here
        ("JSON with null, true and an escaped slash", [call('{"path": "' + value + '\\/x.py", "end_line": null, "all": true}')]),
        ("no tool_calls attribute", None),
        ("an empty tool_calls list", []),
    ]


def expected_calls(calls) -> list:
    """What the contract says parse_tool_calls returns, worked out here with json itself."""
    out = []
    for call_id, name, text in calls or []:
        try:
            value = json.loads(text) if text else {}
        except (ValueError, RecursionError):
            value = None
        ok = isinstance(value, dict)
        out.append([call_id, name, json.dumps(value if ok else {}, sort_keys=True), not ok])
    return out


def loop_scripts(t: dict):
    """(description, script, max_steps) for run_agent: a scripted model's turns, ids drawn per run."""
    def call(arguments=None):
        return [f"call_{secrets.token_hex(4)}", "read_file", arguments or json.dumps({"path": t["file"]})]
    answer = f"the answer is {_name()}"
    first, twin = call(), call()
    twin[2] = first[2]
    missing = call(json.dumps({"path": _name() + ".py"}))                      # a tool error: no such file
    reordered = call(json.dumps({"end_line": 1, "start_line": 1, "path": t["file"]}))  # passed by name or not at all
    steps = 3 + secrets.randbelow(3)
    yield from [
        ("answers at once", [{"answer": answer}], 5),
        ("an empty reply (no text, no calls)", [{"answer": ""}], 5),
        ("an empty reply with content None", [{"answer": None}], 5),   # a filtered or token-capped reply
        ("malformed arguments on every turn", [{"calls": [call('{"path": ')]}], 3 + secrets.randbelow(4)),
        ("the answer on the last allowed step", [{"calls": [call()]} for _ in range(steps - 1)] + [{"answer": answer}], steps),
        ("more tool calls after a tool error", [{"calls": [missing]}, {"calls": [call()]}, {"answer": answer}], 5),
        ("arguments in another key order", [{"calls": [reordered], "ok": [reordered[0]]}, {"answer": answer}], 5),
        ("a thought beside a tool call", [{"calls": [call()], "content": "Thought: read the file first."},
                                          {"answer": answer}], 5),
        ("two calls in one turn, then the answer", [{"calls": [call(), call()]}, {"answer": answer}], 5),
        ("malformed arguments, then the answer", [{"calls": [call('{"path": ')]}, {"answer": answer}], 5),
        ("the same call twice, then the answer", [{"calls": [first]}, {"calls": [twin]}, {"answer": answer}], 5),
        ("a model that never stops", [{"calls": [call()]}], 3 + secrets.randbelow(4)),
        ("a model that never stops, max_steps not given", [{"calls": [call()]}], None),
    ]
