"""Course checks (maintainers): the provided code flows one way.

The import graph of code/ (tests, fixture_repo and bench left out), read with ast, has no cycle,
and nothing below the wiring imports copilot.py (only M6's evaluation, which runs copilot.run from
above): stretch.py, report.py, citations.py and llm.py sit under it, so a learner's stretch file
never imports the orchestrator it is plugged into.
"""

from __future__ import annotations

import ast

from harness.paths import CODE_DIR, REFERENCE_DIR

LEFT_OUT = {"tests", "fixture_repo", "bench", "__pycache__"}


def module_files(root=CODE_DIR) -> dict[str, object]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if set(rel.parts[:-1]) & LEFT_OUT:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imported_modules(path, known) -> set[str]:
    """Every module of ``known`` that ``path`` imports (import, from-import, importlib.import_module)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            names.append(node.args[0].value)
    found = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def import_graph(root=CODE_DIR) -> dict[str, set[str]]:
    files = module_files(root)
    return {name: imported_modules(path, files) - {name} for name, path in files.items()}


def cycles(graph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_of_code_has_no_cycle():
    graph = import_graph()
    assert {"copilot", "stretch", "citations", "llm", "report"} <= set(graph), sorted(graph)
    assert cycles(graph) == [], f"import cycles in code/: {cycles(graph)}"


def test_nothing_below_the_wiring_imports_copilot():
    graph = import_graph()
    importers = sorted(name for name, deps in graph.items() if "copilot" in deps)
    assert set(importers) <= {"harness.evaluation"}, f"only M6's evaluation runs copilot.run; imported by {importers}"
    for name in ("stretch", "report", "citations", "llm"):
        assert "copilot" not in graph[name], f"code/{name}.py imports copilot"
    reference = imported_modules(REFERENCE_DIR / "stretch.py", module_files())
    assert "copilot" not in reference, "rubric/reference/stretch.py imports copilot"


def test_the_cycle_check_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
