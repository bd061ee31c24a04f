"""Retrieval quality of context_selector's ranker against plain BM25 over the same chunks.

    python bench/bench_retrieval.py            # from code/; needs ../shared/corpus (flask, requests)

For each question in retrieval_questions.jsonl (a developer question and the file that answers
it), both rankers order the repository's files by their best chunk; we report the mean
reciprocal rank (MRR) of the answering file, how often it comes first (top-1), and how often it
is among the first 3 (in-3: the files copilot.py injects context from by default).
  - context_selector: identifier-aware terms (snake_case/CamelCase split, plurals folded),
    question stopwords dropped, the file's path words added to each chunk, BM25 weights, and
    the file-role weights (tests, docs and changelogs count less than source).
  - plain BM25: the same chunks, lowercase \\w+ tokens, nothing else.
This is a measurement, not a test: the numbers go in the report, nothing asserts on them.
"""

from __future__ import annotations

import json
import math
import re
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

CODE_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CODE_DIR))

import context_selector as cs  # noqa: E402

CORPUS = CODE_DIR.parent.parent / "shared" / "corpus"
ARCHIVES = {"flask": "flask-3.1.0.tar.gz", "requests": "requests-2.32.3.tar.gz"}
QUESTIONS = Path(__file__).with_name("retrieval_questions.jsonl")
WORD = re.compile(r"\w+")


def extract(name: str, into: Path) -> Path:
    with tarfile.open(CORPUS / ARCHIVES[name]) as tar:
        tar.extractall(into, filter="data")
    return next(p for p in into.iterdir() if p.is_dir() and p.name.startswith(name))


def file_ranking(index, scores) -> list[str]:
    """Files ordered by their best chunk's score (files with no matching chunk left out)."""
    best: dict[str, float] = {}
    for chunk in range(index.n_chunks):
        if scores[chunk] > 0:
            path = index.chunk_path(chunk)
            best[path] = max(best.get(path, 0.0), float(scores[chunk]))
    return sorted(best, key=lambda p: -best[p])


class PlainBM25:
    """Textbook BM25 over the same chunks as the index, with lowercase \\w+ tokens."""

    def __init__(self, index):
        self.docs: list[Counter] = []
        for chunk in range(index.n_chunks):
            lines = cs.file_lines(index, index.chunk_path(chunk))
            text = "\n".join(lines[index.chunk_start[chunk] - 1:index.chunk_end[chunk]])
            self.docs.append(Counter(WORD.findall(text.lower())))
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / max(len(self.lengths), 1)
        self.df = Counter(t for d in self.docs for t in d)

    def scores(self, question: str) -> list[float]:
        n = len(self.docs)
        terms = set(WORD.findall(question.lower()))
        out = []
        for doc, length in zip(self.docs, self.lengths):
            score = 0.0
            for t in terms:
                tf = doc.get(t, 0)
                if tf:
                    idf = math.log1p((n - self.df[t] + 0.5) / (self.df[t] + 0.5))
                    score += idf * tf * (cs.BM25_K1 + 1) / (tf + cs.BM25_K1 * (1 - cs.BM25_B + cs.BM25_B * length / self.avg))
            out.append(score)
        return out


def reciprocal_rank(ranking: list[str], answer: str) -> float:
    return 1.0 / (ranking.index(answer) + 1) if answer in ranking else 0.0


def main() -> int:
    if not CORPUS.is_dir():
        print(f"skipped: {CORPUS} is not here (the corpus lives in ../shared, outside the project)")
        return 0
    questions = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    totals = {"context_selector": [], "plain BM25": []}
    misses = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ARCHIVES:
            root = extract(name, Path(tmp))
            index = cs.load_index(root, Path(tmp) / "cache")
            plain = PlainBM25(index)
            for q in (q for q in questions if q["repo"] == name):
                ours = file_ranking(index, cs.score_chunks(index, cs.question_terms(q["question"])))
                base = file_ranking(index, plain.scores(q["question"]))
                totals["context_selector"].append(reciprocal_rank(ours, q["answer"]))
                totals["plain BM25"].append(reciprocal_rank(base, q["answer"]))
                if ours[:1] != [q["answer"]]:
                    misses.append(f"  {q['question']}\n    want {q['answer']}, got {ours[:3]}")
    print(f"{len(questions)} questions over flask 3.1.0 and requests 2.32.3 (whole repositories: src, tests, docs)")
    for ranker, rr in totals.items():
        top1 = sum(1 for r in rr if r == 1.0) / len(rr)
        in3 = sum(1 for r in rr if r >= 1 / 3) / len(rr)
        print(f"  {ranker:<17} MRR {sum(rr) / len(rr):.3f}   top-1 {top1:.0%}   in-3 {in3:.0%}")
    if "-v" in sys.argv:
        print("context_selector misses:\n" + "\n".join(misses))
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - started:.1f} s)")
    sys.exit(code)
