"""The instructor's sandbox battery: attacks the guiding tests do not contain, in a child process.

Each probe is one path (for safe_resolve) or one tool call (for dispatch_tool). A class of attack
*held* when every probe in it was refused or stayed inside the repository; it *leaked* when one
resolved outside (or a sentinel reached a tool result); it is *unclean* when a probe raised
something other than ValueError (no leak, but a crash the tool would have to survive).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from grading import runner

PROBE_SCRIPT = Path(__file__).resolve().with_name("battery_probe.py")
BATTERY_TIMEOUT = 60
# Judged on the provided tools, not on safe_resolve: a hard link has no path to give it away.
NOT_THE_LEARNERS = {"hard links": "a hard link looks like any file to a path check; only the provided "
                                  "tools' open (nlink check) can refuse it"}


@dataclass
class Battery:
    probes: list = field(default_factory=list)
    error: str = ""                     # could not run at all (import error, crash before any probe)
    import_errors: list = field(default_factory=list)   # "tools.py: RuntimeError: ..." per module
    ran: object = None

    def classes(self) -> dict:
        """class -> {"status": held|leaked|unclean|hung|skipped|too strict, "probes": [...]}."""
        out: dict = {}
        for p in self.probes:
            out.setdefault(p["class"], []).append(p)
        return {name: {"status": _status(name, ps), "probes": ps} for name, ps in out.items()}

    def held(self) -> list:
        return [c for c, v in self.classes().items() if v["status"] == "held" and c != "legal"]

    def broken(self) -> list:
        return [c for c, v in self.classes().items()
                if v["status"] in ("leaked", "hung", "unclean") and c not in NOT_THE_LEARNERS and c != "legal"]


def _status(name: str, probes: list) -> str:
    results = {p["result"] for p in probes}
    if all("NotImplementedError" in p.get("detail", "") for p in probes):
        return "not started"
    if "hung" in results:
        return "hung"
    if name == "legal":
        if results & {"crashed"}:
            return "unclean"
        return "too strict" if results & {"refused", "outside"} else "held"
    if results & {"outside", "leaked"}:
        return "leaked"
    if "crashed" in results:
        return "unclean"
    if results <= {"skipped"}:
        return "skipped"
    return "held"


def run_battery(lab: Path, home: Path, memory_mb: int) -> Battery:
    work = home / "battery"
    work.mkdir()
    ran = runner.run([PROBE_SCRIPT, lab / "code", work], cwd=work, env=runner.child_env(home),
                     timeout=BATTERY_TIMEOUT, memory_mb=memory_mb)
    battery = Battery(ran=ran)
    started = None
    for line in ran.stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if "import_error" in rec:
            battery.import_errors.append(f"{rec['module']}: {rec['import_error']}")
            if rec["module"] == "tools.py":
                battery.error = f"tools.py does not import: {rec['import_error']}"
                return battery
            continue
        if rec.get("started"):
            started = rec
            continue
        rec["detail"] = rec.get("detail", "").replace(str(work.resolve()), "<tmp>").replace(str(work), "<tmp>")
        battery.probes.append(rec)
        started = None
    if started is not None:  # the process died or was killed inside this probe
        why = ran.describe() if (ran.timed_out or ran.crashed) else "no answer"
        battery.probes.append({**started, "result": "hung" if ran.timed_out else "crashed",
                               "detail": f"the probe process ended here: {why}"})
    if not battery.probes:
        battery.error = f"the battery did not run ({ran.describe()}): {ran.stderr[-300:].strip()}"
    return battery
