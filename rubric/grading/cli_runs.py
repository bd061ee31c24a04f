"""The lab's own command-line tools on the learner's code, driven only through their command lines.

    break_and_observe.py all             the learner's code as it is: the defences should hold
    break_and_observe.py all --simulate  with the learner's tools.py/agent_loop.py in the reference
                                         slot, so each break is applied to the learner's functions
    evaluate.py                          the fixture set, scripted runs, offline
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grading import runner, workspace
from grading.documents import parse_blocks

BREAK_TIMEOUT = 45          # both take about a second on an idle machine
EVALUATE_TIMEOUT = 45


@dataclass
class CliRun:
    command: str
    ran: object
    blocks: dict | None = None   # scenario -> evidence fields (break_and_observe)
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.ran.returncode == 0

    def text(self) -> str:
        return self.ran.stdout

    def problem(self) -> str:
        """One line on why it did not run, from its own stderr."""
        if self.ok:
            return ""
        last = [line for line in self.ran.stderr.strip().splitlines() if line.strip()][-1:] or [""]
        return f"{self.ran.describe()}: {last[0][:300]}"


def _python(lab: Path, home: Path, args, timeout, memory_mb, box=None) -> object:
    return runner.run(args, cwd=lab / "code", env=runner.child_env(home), timeout=timeout, memory_mb=memory_mb, box=box)


def _blocks(text: str) -> dict:
    try:
        return parse_blocks(text)
    except (RecursionError, ValueError, MemoryError):   # output shaped by learner code
        return {}


def breaks(lab: Path, home: Path, memory_mb: int, box=None) -> tuple[CliRun, CliRun]:
    """(defences on the learner's code, each break simulated on the learner's code)."""
    plain = _python(lab, home, ["break_and_observe.py", "all"], BREAK_TIMEOUT, memory_mb, box)
    defences = CliRun("python break_and_observe.py all", plain, _blocks(plain.stdout))
    workspace.put_learner_code_in_reference(lab)
    try:
        sim = _python(lab, home, ["break_and_observe.py", "all", "--simulate"], BREAK_TIMEOUT, memory_mb, box)
    finally:
        workspace.restore_reference(lab)
    simulated = CliRun("python break_and_observe.py all --simulate (breaks applied to the learner's functions)",
                       sim, _blocks(sim.stdout))
    if not simulated.ok or len(simulated.blocks) < 5:
        why = simulated.problem() or "some scenarios missing"
        simulated = reference_breaks(lab, home, memory_mb, f"the breaks could not be applied to the learner's code: {why}", box)
    return defences, simulated


_REFERENCE: dict = {}   # the reference's breaks do not depend on the learner: run once per grader process


def reference_breaks(lab: Path, home: Path, memory_mb: int, why: str, box=None) -> CliRun:
    """The simulated breaks on the lab's reference, when the learner's code cannot run them."""
    cached = _REFERENCE.get("run")
    if cached is None or not cached.ok:
        # Reused for every later learner: so never in this learner's lab or home, where their helper
        # modules, a planted cache or a .pth from an earlier command could shape what it prints.
        with tempfile.TemporaryDirectory(prefix="grade-ref-") as fresh:
            ref_lab, ref_home = Path(fresh) / "lab", Path(fresh) / "home"
            ref_home.mkdir()
            workspace.build_lab(ref_lab, Path(fresh) / "no-learner-code")
            ref_box = box and dataclasses.replace(box, readonly=[ref_lab], writable=[ref_home] if box.writable else [],
                                                  scratch=[ref_home] if box.scratch else [])
            if box is not None and box.kind in ("docker", "podman"):
                os.chmod(ref_home, 0o777)
            if ref_box:
                os.chmod(fresh, 0o711)
                ref_box.share(readable=[ref_lab], writable=[ref_home])
            ref = _python(ref_lab, ref_home, ["break_and_observe.py", "all", "--simulate"], BREAK_TIMEOUT, memory_mb,
                          ref_box)
            workspace.remove_tree(ref_lab)   # a copy of read-only files: TemporaryDirectory alone may fail
        cached = _REFERENCE["run"] = CliRun("python break_and_observe.py all --simulate (on the reference)", ref,
                                            _blocks(ref.stdout))
    return dataclasses.replace(cached, note=why)


def skipped(command: str, why: str) -> CliRun:
    return CliRun(command, runner.Ran([command], 2, "", why, 0.0, skipped=why), {}, note=why)


def evaluate(lab: Path, home: Path, memory_mb: int, box=None) -> CliRun:
    ran = _python(lab, home, ["evaluate.py"], EVALUATE_TIMEOUT, memory_mb, box)
    return CliRun("python evaluate.py", ran)


def component_table(text: str) -> dict:
    """component -> (scripted good, scripted bad) from evaluate.py's summary table."""
    out, inside = {}, False
    for line in text.splitlines():
        if re.match(r"component\s{2,}", line):
            inside = True
            continue
        if inside:
            cells = [c for c in re.split(r"\s{2,}", line.strip()) if c]
            if len(cells) < 3 or set(line.strip()) <= set("- "):
                if not line.strip():
                    break
                continue
            out[cells[0]] = tuple(cells[1:3])
    return out
