"""The class overview: one self-contained HTML page, readable offline (inline CSS, no script, no URL).

    render(results, pairs=(), reports="")   the page; ``reports`` is the relative URL of the folder
                                            holding each LEARNER.md / LEARNER.json

A grid of learners by criteria (suggested level, points, HOLD or READ, confidence), learners with a
flag or a HOLD first; each cell links to that criterion's reasons, quoted sentences and evidence
further down the page, and each learner to their Markdown and JSON reports. Pairs of similar
submissions (similarity.py, when the grader found any) get their own table. All learner text is
escaped; a Content-Security-Policy forbids every network load even if something slipped through.
"""

from __future__ import annotations

from urllib.parse import quote

from grading.report import confidence, flag_items, flags, mark, quotes, rule_reasons
from grading.safe_text import file_stem, html, terminal

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#1b1b1b;background:#fff}
h1{font-size:1.5em;margin:0 0 .3em} h2{margin-top:2em;border-bottom:2px solid #ddd}
table{border-collapse:collapse;margin:.6em 0} th,td{border:1px solid #ccc;padding:.3em .5em;vertical-align:top}
thead th{background:#f0f0f0;position:sticky;top:0} .grid td.cell{text-align:center;min-width:6.5em}
.grid td.cell a{color:inherit;text-decoration:none;display:block} .num{text-align:right;white-space:nowrap}
.Exemplary{background:#cdeccd}.Proficient{background:#e6f4d7}.Developing{background:#fdebc8}.Missing{background:#f8d0d0}
.HOLD{background:#e2d4f4}
.badge{display:inline-block;font-size:.75em;font-weight:700;padding:0 .35em;border-radius:.3em;margin-left:.2em}
.b-HOLD{background:#6a3d9a;color:#fff}.b-READ{background:#1f5fa8;color:#fff}.conf{font-size:.75em;color:#555;display:block}
.flags{color:#8a1c1c;font-size:.9em} tr.flagged th{border-left:4px solid #8a1c1c}
.grid th[scope=row]{max-width:16em;overflow-wrap:anywhere;text-align:left} .grid td.flags{max-width:14em}
section.learner{border-top:1px solid #ccc;margin-top:1.5em} .crit{margin:.6em 0 .9em 1em}
.rule{font-family:ui-monospace,monospace;font-size:.85em;color:#555} blockquote{margin:.3em 0 .3em 1em;color:#333;
border-left:3px solid #bbb;padding-left:.6em} pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;
padding:.5em;font-size:.85em;max-width:110em} td pre{margin:.15em 0;padding:.2em .4em}
.legend{color:#444;max-width:60em}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'"
PAIRS_SHOWN = 12   # pairs in the open table; the rest are one click away


def _t(text) -> str:
    """Learner or grader text for HTML: control characters made visible, then escaped."""
    return html(terminal(text), quote=True)


def _order(r: dict) -> tuple:
    held = any(mark(c) == "HOLD" for c in r.get("criteria", []))
    read = any(mark(c) == "READ" for c in r.get("criteria", []))
    return (0 if held or flags(r) else 1 if read else 2, str(r.get("learner", "")))


def _count(results: list, which: str) -> int:
    return sum(1 for r in results for c in r.get("criteria", []) if mark(c) == which)


def _href(reports: str, learner, suffix: str) -> str:
    return html(reports + quote(file_stem(learner) + suffix), quote=True)


def render(results: list, pairs=(), reports: str = "", title: str = "Lesson 06: class overview") -> str:
    results = sorted(results, key=_order)
    numbers = [(c["number"], c["title"], c["weight"]) for c in (results[0]["criteria"] if results else [])]
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_t(title)}</title><style>{CSS}</style></head><body>", f"<h1>{_t(title)}</h1>",
           f'<p class="legend">{len(results)} learner(s); {_count(results, "HOLD")} criteria on HOLD, '
           f'{_count(results, "READ")} to READ, {sum(1 for r in results if flags(r))} learner(s) flagged. '
           "Every level is a <b>suggestion</b>; you decide. "
           "<b>HOLD</b>: talk to the learner before grading this criterion. <b>READ</b>: confirm the prose level "
           "from the quoted sentences. Learners with a flag or a HOLD come first. Click a cell for its reasons and "
           "evidence. Record your decisions in the grades CSV, then run <code>grade.py --finalize</code>.</p>"]
    out += ['<table class="grid"><thead><tr><th>Learner</th><th>Total</th><th>Flags</th>']
    out += [f'<th title="{_t(t)}">C{n} {_t(t.split(",")[0].split()[0])}<br><span class="conf">{w} points</span></th>'
            for n, t, w in numbers]
    out.append("</tr></thead><tbody>")
    for i, r in enumerate(results, 1):
        found = flags(r)
        out.append(f'<tr{" class=flagged" if found else ""}><th scope="row"><a href="#l{i}">{_t(r["learner"])}</a>'
                   f'<br><span class="conf"><a href="{_href(reports, r["learner"], ".md")}">report</a> · '
                   f'<a href="{_href(reports, r["learner"], ".json")}">json</a></span></th>'
                   f'<td class="num">{r.get("total", 0)} / {r.get("max_total", 0)}</td>'
                   f'<td class="flags">{"<br>".join(_t(label) for label, _ in flag_items(r)) or "none"}</td>')
        for c in r.get("criteria", []):
            m = mark(c)
            cls = "HOLD" if m == "HOLD" else c["level"] if c["level"] in ("Exemplary", "Proficient", "Developing", "Missing") else ""
            badge = f'<span class="badge b-{m}">{m}</span>' if m else ""
            conf = f'<span class="conf">{_t(confidence(c))}</span>' if confidence(c) else ""
            level = "decide" if c["level"] == "HOLD" else c["level"]  # the badge says HOLD
            out.append(f'<td class="cell {cls}"><a href="#l{i}-c{c["number"]}">{_t(level)}{badge}'
                       f'<span class="conf">{c["points"]} / {c["weight"]}</span>{conf}</a></td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    out += _pairs(list(pairs or []))
    out.append("<h2>Learners</h2>")
    for i, r in enumerate(results, 1):
        out += _learner(i, r, reports)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _pair_names(p: dict) -> tuple:
    names = p.get("learners") or [p.get("a", "?"), p.get("b", "?")]
    return (list(names) + ["?", "?"])[:2]


def _pairs(pairs: list) -> list:
    """The most similar pairs in a table, the rest folded below it (a class can have hundreds)."""
    rows, seen = [], set()
    for p in pairs:
        a, b = _pair_names(p)
        key = (tuple(sorted(map(str, (a, b)))), str(p.get("kind", "")), str(p.get("what", p.get("function", ""))))
        if key in seen:  # each learner's result may list the same pair
            continue
        seen.add(key)
        score = p.get("score", p.get("similarity", ""))
        score = f"{round(score * 100)} %" if isinstance(score, float) and score <= 1 else score
        shared = p.get("shared") or p.get("passages") or []
        shared = [shared] if isinstance(shared, str) else shared
        rows.append(f"<tr><td>{_t(a)} &amp; {_t(b)}</td><td class=num>{_t(score)}</td>"
                    f"<td>{_t(p.get('kind', ''))} {_t(p.get('what', p.get('function', '')))}</td>"
                    f"<td>{''.join(f'<pre>{_t(str(s)[:600])}</pre>' for s in shared[:3])}</td></tr>")
    if not rows:
        return []
    head = ("<table><thead><tr><th>Learners</th><th>Similarity</th><th>What</th><th>Shared passages</th></tr>"
            "</thead><tbody>")
    out = ['<h2 id="similar">Similar submissions</h2>', head] + rows[:PAIRS_SHOWN] + ["</tbody></table>"]
    if len(rows) > PAIRS_SHOWN:
        out += [f"<details><summary>{len(rows) - PAIRS_SHOWN} more pairs</summary>", head] + rows[PAIRS_SHOWN:] \
            + ["</tbody></table></details>"]
    return out


def _learner(i: int, r: dict, reports: str) -> list:
    out = [f'<section class="learner" id="l{i}"><h3>{_t(r["learner"])}: {r.get("total", 0)} / {r.get("max_total", 0)} '
           f'suggested</h3><p><a href="{_href(reports, r["learner"], ".md")}">Markdown report</a> · '
           f'<a href="{_href(reports, r["learner"], ".json")}">JSON (every test, probe and signal)</a>'
           + (f" · sandbox: {_t(r['sandbox'])}" if r.get("sandbox") else "") + "</p>"]
    found = flags(r)
    if found:
        out.append('<ul class="flags">' + "".join(f"<li>{_t(f)}</li>" for f in found) + "</ul>")
    for c in r.get("criteria", []):
        m = mark(c)
        out.append(f'<div class="crit" id="l{i}-c{c["number"]}"><h4>C{c["number"]} {_t(c["title"])}: '
                   f'{_t(c["level"])} ({c["points"]} / {c["weight"]})'
                   + (f' <span class="badge b-{m}">{m}</span>' if m else "")
                   + (f' <span class="rule">confidence {_t(confidence(c))}</span>' if confidence(c) else "") + "</h4><ul>")
        out += [f'<li><span class="rule">[{_t(rule)}]</span> {_t(text)}</li>' for rule, text in rule_reasons(c)]
        out.append("</ul>")
        out += [f"<blockquote>{_t(q)}</blockquote>" for q in quotes(c)]
        evidence = c.get("evidence") or []
        if evidence:
            out.append(f"<details><summary>Evidence ({len(evidence)} lines)</summary><pre>"
                       + _t("\n".join(map(str, evidence))) + "</pre></details>")
        out.append("</div>")
    integrity = r.get("integrity", {}).get("lines") or []
    if integrity:
        out.append("<details><summary>Integrity</summary><pre>" + _t("\n".join(map(str, integrity))) + "</pre></details>")
    out.append("</section>")
    return out
