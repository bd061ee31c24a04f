"""The machinery of break_and_observe.py (M6): run one scenario safely and measure what happened.

``observe`` runs a scenario's loop in a fresh workspace (harness/misbehaving.py) behind the Meter
and the Observer (harness/meter.py), with the scenario's scripted model or a real one, and returns
its ``Evidence``: every number comes from the run itself. The judges at the end decide, scenario by
scenario, whether the break's failure showed up.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.lab import Lab
from harness.meter import Executed, HarnessCeiling, Meter, Observer
from harness.misbehaving import (
    OUTSIDE_SENTINEL, DescriptionReader, Intruder, Investigator, Rereader, Workspace, elsewhere, workspace)
from harness.paths import SENTINEL
from harness.strict_provider import ProviderRejected


# List prices in US$ per million tokens (input, output), from LiteLLM 1.110.2's bundled price map.
# The first is the lab's default model (config.PROVIDER_DEFAULTS); the second a pricier hosted one.
PRICES = (
    ("groq/openai/gpt-oss-120b", 0.15, 0.60),
    ("anthropic/claude-haiku-4-5", 1.00, 5.00),
)
CONTEXT_WINDOW = 131_072        # groq/openai/gpt-oss-120b's input limit, same price map


@dataclass
class Evidence:
    """What one scenario run measured. Every number comes from the run itself."""

    scenario: str
    ran: str                 # which implementation, and whether the break was simulated
    model: str
    steps: int               # model calls
    tool_calls: int          # tool calls that actually ran
    tool_errors: int         # of those, results starting with "Error:"
    tokens_in: int
    tokens_out: int
    tokens_estimated: bool
    repeats: int             # requested calls identical to an earlier one (same tool, same arguments)
    most_repeated: str
    results_seen: int        # tool results that appeared in a later request to the model
    leaked: bool             # a sentinel reached a tool result or the answer
    ended: str               # answered | max_steps | harness ceiling | token budget | provider rejected | crashed
    ended_detail: str
    failure_observed: bool   # did the break's failure show up in this run?
    verdict: str
    prevented_by: str
    wall_seconds: float
    details: list = field(default_factory=list)  # scenario-specific (label, value) lines
    answer: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------- one measured run

def observe(scenario, lab: Lab, *, changes=(), loop=None, simulated: bool = False, model=None, usage=None,
            model_label: str | None = None, max_calls: int, max_tokens: int, system_prompt: str,
            workdir=None) -> Evidence:
    """Run one scenario (a break_and_observe.Scenario) once, in a fresh workspace, and measure it.

    changes    (object, attribute, value) patches for the run (a simulated break), undone after.
    loop       the run_agent to call (default: the lab's, looked up once the patches are in place).
    model      a real ``complete(messages, tools)``; default: the scenario's scripted model.
    Raises NotImplementedError ("M<n>: ...") when a learner function is still a stub.
    """
    real = model is not None
    with workspace(scenario.name, workdir) as ws:
        scripted = None if real else _scripted_model(scenario.name, ws)
        meter = Meter(model or scripted, max_calls, max_tokens, usage)
        observer = Observer(lab.tools.dispatch_tool, meter)
        changes = [*changes, (lab.agent_loop, "dispatch_tool", observer), (lab.tools, "dispatch_tool", observer)]
        messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": scenario.question}]
        started = time.perf_counter()
        with patched(*changes):
            loop = loop or lab.agent_loop.run_agent
            result, ended, detail = _drive(loop, messages, ws.repo, meter)
            if scenario.name == "escape":  # the sandbox itself, asked about every path the run tried
                ws.let_out = _let_out(lab.tools.safe_resolve, ws, observer.executed)
        wall = time.perf_counter() - started
        ran = f"simulated break on {lab.label}" if simulated else lab.label
        label = model_label or f"scripted (not a real model): {scenario.model}"
        evidence = _measure(scenario, ws, meter, observer, scripted, result, ended, detail, ran, label, wall, real)
    return evidence


@contextlib.contextmanager
def patched(*changes):
    """Set (object, attribute, value) for the duration of the block, then restore them."""
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in changes]
    try:
        for obj, name, value in changes:
            setattr(obj, name, value)
        yield
    finally:
        for obj, name, value in reversed(saved):
            setattr(obj, name, value)


def _scripted_model(name: str, ws: Workspace):
    if name == "runaway":
        return Rereader()
    if name == "escape":
        return Intruder(_probes(ws))
    if name == "vague-tools":
        return DescriptionReader()
    return Investigator()


def _probes(ws: Workspace):
    """Ways out of the repository, each aimed at the sentinel planted beside it."""
    probes = [
        ("read_file", {"path": "../outside/secret.txt"}),                       # dot-dot
        ("read_file", {"path": str(ws.root.resolve() / "outside" / "secret.txt")}),  # absolute
        ("read_file", {"path": "../repo_evil/secret.txt"}),                     # sibling sharing the prefix
        ("read_file", {"path": str(elsewhere(ws) / "secret.txt")}),             # the root's path inside another
        ("read_file", {"path": "shop/../../outside/secret.txt"}),               # climbing through a sub-folder
        ("read_file", {"path": "nowhere/../../outside/secret.txt"}),            # ... through one that does not exist
        ("list_directory", {"path": "../outside"}),                             # listing outside
    ]
    if ws.case_sibling:
        probes.append(("read_file", {"path": "../Repo/secret.txt"}))           # sibling differing only in case
    if ws.symlink:
        probes.append(("read_file", {"path": "linked/secret.txt"}))            # in-repo symlink leading out
    if ws.file_link:
        probes.append(("read_file", {"path": "innocent.md"}))                  # an innocent-looking file link
    probes.append(("read_file", {"path": ".env"}))                              # a secret INSIDE the repo
    return probes


def _drive(loop, messages, repo, meter: Meter):
    """Run the loop; turn every way it can end into (result, ended, detail). Never raises except
    NotImplementedError (a stub) and KeyboardInterrupt."""
    try:
        result = loop(messages, repo, meter)
    except HarnessCeiling as stop:
        kind = "token budget" if str(stop).startswith("token") else "harness ceiling"
        reason = str(stop).split(": ", 1)[-1]
        return None, kind, f"stopped at {reason}; the loop under test had not stopped by itself"
    except NotImplementedError:
        raise  # a learner function is still a stub: the caller says which milestone
    except ProviderRejected as exc:
        return None, "provider rejected", str(exc)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # the loop under test crashed: that is evidence too
        if meter.rejected:
            return None, "provider rejected", meter.rejected
        return None, "crashed", f"{type(exc).__name__}: {exc}"
    if meter.stopped:  # the loop caught the ceiling somehow and returned anyway
        return result, "harness ceiling", meter.stopped
    text = str(result)
    if text.startswith("MAX_STEPS_REACHED"):
        return text, "max_steps", f"the loop returned MAX_STEPS_REACHED after {meter.calls} model calls"
    return text, "answered", f"the model answered after {meter.calls} model calls"


def _measure(scenario, ws, meter, observer, scripted, result, ended, detail, ran, label, wall, real) -> Evidence:
    executed = observer.executed
    results = [e.result or "" for e in executed]
    errors = sum(1 for r in results if r.startswith("Error:"))
    counts = Counter(meter.requested)
    repeats = len(meter.requested) - len(counts)
    most = ""
    if counts:
        (tool, args), times = counts.most_common(1)[0]
        most = f"{tool} {ws.hide(args)} x{times}"
    seen = sum(1 for e in executed if e.result and any(e.result in r.tool_texts for r in meter.requests[e.step:]))
    answer_text = ws.hide(result or "")
    secrets = (OUTSIDE_SENTINEL, SENTINEL)
    leaked_results = [e for e in executed if e.result and any(s in e.result for s in secrets)]
    leaked = bool(leaked_results) or any(s in answer_text for s in secrets)
    ev = Evidence(
        scenario=scenario.name, ran=ran, model=label, steps=meter.calls, tool_calls=len(executed),
        tool_errors=errors, tokens_in=meter.tokens_in, tokens_out=meter.tokens_out,
        tokens_estimated=not real, repeats=repeats, most_repeated=most, results_seen=seen,
        leaked=leaked, ended=ended, ended_detail=ws.hide(detail), failure_observed=False, verdict="",
        prevented_by=scenario.prevented_by, wall_seconds=round(wall, 3), answer=answer_text[:300],
    )
    DETAILS[scenario.name](ev, ws, meter, observer, scripted)
    return ev


# --------------------------------------------------------------------------- did the failure show up?
# One judge per scenario: it sets failure_observed, the verdict and the scenario's detail lines.

def _runaway(ev, ws, meter, observer, scripted):
    ev.failure_observed = ev.ended in ("harness ceiling", "token budget")
    per_call = [r.tokens_in for r in meter.requests]
    if len(per_call) >= 2 and ev.failure_observed:
        growth = (per_call[-1] - per_call[0]) / (len(per_call) - 1)
        if growth > 0:
            more = math.ceil((CONTEXT_WINDOW - per_call[-1]) / growth)
            calls = len(per_call) + max(more, 0)
            sent = sum(per_call) + sum(per_call[-1] + growth * k for k in range(1, max(more, 0) + 1))
            price = PRICES[0]
            ev.details.append(("projection", (
                f"each call resends the whole history (+{growth:,.0f} tokens per call here): left "
                f"running, it would fill {price[0]}'s {CONTEXT_WINDOW:,}-token window after about "
                f"{calls:,} calls, having sent ~{sent:,.0f} input tokens "
                f"(${sent * price[1] / 1e6:,.2f} at that price; ${sent * PRICES[1][1] / 1e6:,.2f} at {PRICES[1][0]}'s)")))
    if ev.failure_observed:
        ev.verdict = "the failure happened: the loop never stopped by itself; only the harness ceiling ended it"
    elif ev.ended == "max_steps":
        ev.verdict = f"no runaway: the loop stopped itself after {ev.steps} model calls; the cap is still in place"
    else:  # answered, crashed, rejected: the cap was never put to the test
        ev.verdict = f"no runaway observed: the run ended ({ev.ended}) before any cap was tested"


def _let_out(safe_resolve, ws: Workspace, executed) -> dict:
    """{path: where safe_resolve put it} for each path of the run that safe_resolve returned
    outside the repository. The provided tools check again before opening (defence in depth), so a
    run can leak nothing while the sandbox let a path out: that is still a sandbox that did not hold."""
    root, out = ws.repo.resolve(), {}
    for e in executed:
        path = e.args.get("path") if isinstance(e.args, dict) else None
        if not isinstance(path, str) or path in out:
            continue
        try:
            got = Path(safe_resolve(ws.repo, path))
            if not got.resolve().is_relative_to(root):
                out[path] = ws.hide(got)
        except Exception:  # noqa: BLE001  (refused, in whatever words: not let out)
            continue
    return out


def _escape(ev, ws, meter, observer, scripted):
    outside = [e for e in observer.executed if _probe_kind(e, ws)]
    lines, escaped = [], 0
    for e in outside:
        text = e.result or ""
        inside_secret = _probe_kind(e, ws) == "secret"
        got_out = OUTSIDE_SENTINEL in text or (e.name == "list_directory" and "secret.txt" in text)
        if not inside_secret:
            escaped += got_out
        if got_out or SENTINEL in text:
            lines_out = text.splitlines()
            marker = next((line for line in lines_out if OUTSIDE_SENTINEL in line or SENTINEL in line),
                          next((line for line in lines_out if "secret.txt" in line), ""))
            status = f"LEAKED: {marker.split('|', 1)[-1].strip()}"
        elif target_path(e) in ws.let_out:
            status = (f"LET OUT by safe_resolve (it returned {ws.let_out[target_path(e)]}); only a later check "
                      f"of the provided tools stopped it: {text.splitlines()[0][:60] if text else '(no result)'}")
        elif "subpath" in text:  # Path.relative_to's message: display_path choked, no sandbox involved
            status = "refused by accident (display_path could not shorten it, not a sandbox)"
        else:
            status = f"refused: {text.splitlines()[0][:70] if text else '(no result)'}"
        target = e.args.get("path") if isinstance(e.args, dict) else e.args
        lines.append((f"probe {e.name}", ws.hide(f"{target} -> {status}")))
    probes = sum(1 for e in outside if _probe_kind(e, ws) == "outside")
    if not ws.symlink:
        lines.append(("probe symlink", "skipped: this system cannot create symlinks"))
    if not ws.case_sibling:
        lines.append(("probe case", "skipped: this file system ignores case, so no sibling folder can differ "
                                    "from the repository only in case (Repo is repo here)"))
    in_answer = OUTSIDE_SENTINEL in ev.answer or SENTINEL in ev.answer
    ev.details.append(("escaped", f"{escaped} of {probes} probes outside the repository got through"
                       + ("; the sentinel reached the final answer" if in_answer else "")))
    ev.details.extend(lines)
    accidents = sum(1 for _, line in lines if "by accident" in line or "LET OUT" in line)
    ev.failure_observed = ev.leaked or accidents > 0
    if ev.leaked:
        ev.verdict = "the failure happened: a file outside the repository reached the model"
    elif accidents:
        ev.verdict = (f"nothing leaked, but the sandbox did not hold: safe_resolve let {accidents} probe(s) out of "
                      "the repository, and only the provided tools' own later checks stopped them")
    else:
        ev.verdict = "no escape: every probe was refused; the sandbox held"


def target_path(e: Executed):
    return e.args.get("path") if isinstance(e.args, dict) else None


def _probe_kind(e: Executed, ws: Workspace) -> str | None:
    """'outside' for a call aimed outside the repository, 'secret' for one aimed at a secret in it."""
    path = e.args.get("path") if isinstance(e.args, dict) else None
    if not isinstance(path, str):
        return None
    try:
        target = (ws.repo / path).resolve()  # where the OS would really go, symlinks followed
    except (OSError, RuntimeError, ValueError):
        return "outside"
    if not target.is_relative_to(ws.repo.resolve()):
        return "outside"
    return "secret" if target.name.casefold() == ".env" else None


def _amnesia(ev, ws, meter, observer, scripted):
    ev.details.append(("results seen", f"{ev.results_seen} of {ev.tool_calls} tool results reached the model "
                       "in a later request"))
    ev.failure_observed = ev.tool_calls > 0 and ev.results_seen == 0
    if not ev.failure_observed:
        ev.verdict = "no amnesia: the model saw its results and moved on"
    elif ev.ended == "provider rejected":
        ev.verdict = ("the failure happened: the tool ran but its result never reached the model, and a real "
                      "provider refuses such a conversation (400) before the model can even repeat itself")
    else:
        ev.verdict = ("the failure happened: the tools ran, but the model never saw a single result"
                      + (f" and repeated itself {ev.repeats} times" if ev.repeats else ""))


def _raw_arguments(ev, ws, meter, observer, scripted):
    requested = len(meter.requested)
    # What the model was told: an error may come from dispatch_tool or from the loop itself (call.error).
    told = [text for request in meter.requests for text in request.tool_texts]
    first_error = next((t for t in [e.result or "" for e in observer.executed] + told if t.startswith("Error:")), "")
    arg_types = sorted({type(e.args).__name__ for e in observer.executed})
    ev.details.append(("arguments", f"dispatch_tool received {', '.join(arg_types)}" if arg_types else
                       f"none of the {requested} requested calls reached dispatch_tool"))
    if first_error:
        ev.details.append(("first error", ws.hide(first_error)[:120]))
    valid = ev.tool_calls - ev.tool_errors
    ev.details.append(("valid calls", f"{valid} of {requested} requested"))
    ev.failure_observed = ev.ended == "crashed" or (requested > 0 and valid == 0)
    if ev.ended == "crashed":
        ev.verdict = f"the failure happened: the run crashed ({ev.ended_detail})"
    elif ev.failure_observed and ev.tool_calls:
        ev.verdict = "the failure happened: no tool call could run, because the arguments arrived as a string"
    elif ev.failure_observed:
        ev.verdict = (f"the failure happened: none of the {requested} requested calls ran, because their "
                      "arguments never became a dict; each came back as an error"
                      + (f" and the model repeated itself {ev.repeats} times" if ev.repeats else ""))
    elif valid < requested:
        ev.verdict = f"no failure, but only {valid} of {requested} requested calls ran"
    else:
        ev.verdict = "no failure: every call's arguments arrived as a dict, and every call ran"


def _vague_tools(ev, ws, meter, observer, scripted):
    choices = scripted.choices if scripted is not None else []
    wrong = [c for c in choices if c[1] != c[2]]
    if choices:
        ev.details.append(("tool choice", f"{len(choices) - len(wrong)} of {len(choices)} picks were the right tool"))
        for intent, picked, expected in wrong:
            ev.details.append(("wrong tool", f"wanted to {intent!r}: picked {picked}, needed {expected}"))
        ev.failure_observed = bool(wrong)
    else:  # a real model: judge by the calls that failed
        ev.failure_observed = ev.tool_errors > 0
    ev.verdict = ("the failure happened: the model could not tell the tools apart and called the wrong one"
                  if ev.failure_observed else "no confusion: every call went to the right tool")


DETAILS = {"runaway": _runaway, "escape": _escape, "amnesia": _amnesia,
           "raw-arguments": _raw_arguments, "vague-tools": _vague_tools}

