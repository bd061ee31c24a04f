"""Context injection: before the loop starts, find the few snippets of code most related to the question.

    select_context("why does config default to Groq?", ".")
    -> [Snippet(path='config.py', start_line=30, end_line=41, score=7.9, text='...'), ...]

How (the retrieval you built in Projects 03/04, applied to source files), in the order of this file:
  1. Walk the repository with tools.iter_repo_files, the same visibility rules as the tools
     (no .git, no virtualenvs, never a .env or a private key).
  2. Chunk (chunking.py): Python by top-level function and class (a big class by method), the
     lines between them as their own chunks; doc pages by section; other text by windows of lines.
  3. Score: embed every chunk and the question as vectors, and rank chunks by their dot product,
     scaled by the file's role (source 1.0; docs 0.7; tests and changelogs 0.5; a question
     about tests puts tests at 1.0 and source at 0.7, a how-to or why question docs at 1.0).
     A how-to question also weighs every word it is asked in, stop words too, against the
     chunks' own text (literal_scores): the docs use the words such questions are asked in.
     A file ranks by its best chunk plus a share of its second best.
  4. Pick the best chunks of the top-k files, within a character budget.
  5. Render them with line numbers, the way read_file shows a file.

The simplest embedding: one dimension per word of the repository's vocabulary. A chunk's value on
a word is its BM25 term weight (how often the word occurs, saturated, adjusted for chunk length);
the question's value is the word's rarity (IDF). Their dot product is the BM25 score. Words are
split the way code is written: ``SecureCookieSessionInterface`` also counts as ``secure``,
``cookie``, ``session``, ``interface``, and ``order_total`` as ``order`` and ``total``, so the
question "session cookie" meets that class; endings are folded (stem: "compared" meets
``compare_digest``, "serialised" meets ``serialize``). Some words say more than others and count
several times, as fields weighted in BM25F: the file's path, a doc section's heading path, the
name a chunk defines.
These sparse vectors need no model and no network. Every weight here was measured with
bench/bench_retrieval.py --ablate (README there); those that did not pay were removed.

With an ``embed`` function (copilot.py passes one when EMBEDDING_MODEL is set), dense vectors from
an embedding model join in (embeddings.py) for a question asked in everyday words: one that names
no code (no identifier, no backticked name) and is not a how-to question (uses_dense). There words
miss most, and a model finds code asked about in other words; identifiers and error messages are
what words rank best, and the model put doc pages far below where the words do. Each chunk's
lexical score, scaled to the best one, plus its dense score scaled the same way (DENSE_WEIGHT),
a weight that fades to nothing as the best lexical chunk's lead over the next grows to
DENSE_MARGIN (fuse_scores); then doc pages go back to the places the words gave them, and the
model reorders only the files around them (keep_doc_places). Rank fusion was the first choice;
with a small model it ranked below lexical alone on doc and error questions (bench/README.md).

The machinery lives beside this file: context_index.py stores the chunks' counts as an inverted
index, builds it in parallel for big repositories and caches it outside the repository
(config.default_cache_dir), keyed by the files' content hashes; embeddings.py caches dense vectors
by chunk content and embedder. A second run reads and embeds nothing it already has.
"""

from __future__ import annotations

import re
import sys
from array import array
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

import context_index
from context_index import FileChunks, LexicalIndex, as_text, content_hash, file_lines, read_bytes
from embeddings import EmbeddingFailed, LiteLLMEmbedder, dense_scores  # noqa: F401  (LiteLLMEmbedder: copilot.py builds one)
from chunking import DEFINITION, DOC_SUFFIXES, headings, spans_of_lines, whole_statements
from tools import TreeReader, printable, split_lines

DEFAULT_TOP_FILES = 3             # k: how many files the injected context comes from
CONTEXT_CHAR_BUDGET = 6_000       # all snippets together (~1,500 tokens): cheap grounding, not the repo
MAX_SNIPPETS_PER_FILE = 2
SNIPPET_MAX_LINES = 40            # a longer chunk is shown as its most relevant 40 lines (chunking.whole_statements
                                  # may add up to STATEMENT_SLACK to end on a whole statement)
PATH_WEIGHT = 5                   # a file name is strong evidence: its words count 5 times (bench/bench_retrieval.py)
DUNDER_PATHS = True               # leave __init__, __main__ out of a file's path words
HEADING_WEIGHT = 3                # a doc section's heading path (page title, section titles): its words count 3 more times
NAME_WEIGHT = 2                   # a Python chunk's definition name (def/class): its words count 2 more times
SECOND_CHUNK_WEIGHT = 0.3         # a file's second-best chunk adds this share of its score (file_scores)
FILE_WEIGHT = 0.1                 # a chunk also gets this share of its whole file's BM25 score (score_chunks)
LITERAL_WEIGHT = 0.75             # a how-to question's literal_scores, beside score_chunks' (lexical_scores)
STEM = True                       # fold -ed/-ing/-e endings too, so "compared" meets compare_digest
# British -ise spellings folded into -ize (with STEM): a learner who writes "serialised" or
# "customise" meets the code's serialize and the docs' "customize".
ISE = re.compile(r"(?<=[a-z]{4})is(e|ed|ing|ation|er)$")
# Questions to a coding copilot are mostly about what the code does: when a source file and a test,
# a doc page or a changelog match equally well, show the source (MRR 0.55 -> 0.79 in bench_retrieval.py).
ROLE_WEIGHTS = {"source": 1.0, "test": 0.5, "doc": 0.7, "changelog": 0.5, "meta": 0.5}
# ...unless the question says what it wants (question_intent): one about tests puts tests first
# (bench_retrieval.py, test questions: MRR 0.34 -> 0.82), a how-to question puts docs level with source.
INTENT_WEIGHTS = {"test": {"source": 0.7, "test": 1.0}, "howto": {"doc": 1.0}}
TEST_WORDS = frozenset({"test", "tests", "tested", "testing"})
# A question about tests asks which test file: there a word's rarity (IDF) is counted over files,
# not chunks, since a test file repeats its subject's words in every test (common among its chunks)
TEST_FILE_IDF = True              # off in bench_retrieval.py's "chunk idf for test questions"
# "my tests", "our unit tests": the user's own tests, not the project's; the docs usually answer.
OWN_TESTS = re.compile(r"\b(my|our|your)\s+(own\s+)?(unit\s+|integration\s+)?(tests?|test suite|testing)\b", re.IGNORECASE)
# "Where is that implemented?", "where does the library add...": the user asks for the code, even
# in a how-to question ("How do I run as root, and where does the library add sudo?").
IMPLEMENTED_WHERE = re.compile(r"\bwhere (is|are) (that|this|it|they) (implemented|handled|decided|computed|calculated"
                               r"|defined|done|coded|enforced|applied|generated|built|set)\b"
                               r"|\bwhere (does|do) the (code|library|package|module|framework|tool|app|class|function)\b"
                               r"|\bwhere in the (code|source|library|package|codebase)\b", re.IGNORECASE)
# "Where is it checked that...", "Which check proves...": asked without the word, still a test question.
CHECKED_WHERE = re.compile(r"\bwhere (is|are) (it|this|that|they) (checked|verified|asserted|ensured|confirmed)\b"
                           r"|\bwhich checks? (proves?|shows?|confirms?)\b", re.IGNORECASE)
# "How do I deploy..." asks how to use something (docs); "How does X work?" asks what the code does.
# "Can I...?", "Is there a way...?", "I want to...", "What changed...?" ask what the project offers
# or expects of its user, which is what its docs are written to say.
HOWTO = re.compile(r"\bhow (do|can|should|would) (i|we|you)\b|\b(docs|documentation|documented|tutorial)\b"
                   r"|\b(can|could|should) (i|we)\b|^(is|are) there\b|\bis (there|it possible)\b|\bi want to\b"
                   r"|\bhow am i supposed\b|\bwhat changed\b|\bwhat('s| is) (the|a) (best|recommended|right|sensible)\b",
                   re.IGNORECASE)
# "Why is...", "What's the difference...", "What are slotted classes?": asked in words, with no name
# from the code in them, these are what a doc page explains.
CONCEPT = re.compile(r"\bwhy\b|\bdifference\b|^what (is|are)\b|\bwhat's\b", re.IGNORECASE)
# So do a user's yes/no questions and wishes, asked in words alone: "Can several workers share one
# job store?", "Will it catch up on missed runs?", "I want users to...", "Possible?", "... bug?".
USER_GOAL = re.compile(r"(?:^|[.?!;:]\s+)(can|could|will|would|does|do|is|are|should|may)\b"
                       r"|\bi(?:'d| would)? (?:want|like|need|prefer|rather)\b|\bi'd\b|\bpossible\b|\bbug\?",
                       re.IGNORECASE)
# A name from the code: `quoted`, snake_case, CamelCase, dotted.name or call().
CODE_NAME = re.compile(r"`[^`]+`|\b[a-z0-9]+_[a-z0-9_]+\b|\b[A-Z][a-z0-9]+[A-Z]\w*|\b\w+\.\w+|\w\(\)")
# "-h", "-v": a command-line option's letter is a term, though single letters are dropped otherwise.
OPTION_LETTER = re.compile(r"(?<![\w-])-([A-Za-z])\b")
# "jinja2.exceptions.UndefinedError: ...": the module before an exception's name says where the
# class is defined, not where it is raised (the file that answers); its words are left out.
ERROR_MODULE = re.compile(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Z]\w*(?:Error|Exception|Warning|Exit)\b)")
CHANGELOG_NAMES = re.compile(r"(history|changes|changelog|news)(\.(md|rst|txt))?$", re.IGNORECASE)
TEST_DIRS = frozenset({"test", "tests", "testing"})
# Test folders by a suffix or prefix too ("portalocker_tests/", "tests_unit/"), and modules named tests.py
TEST_NAMES = re.compile(r"(tests?_\w+|\w+_tests?)$")   # off in bench_retrieval.py's "named test folders only"
DOC_DIRS = frozenset({"doc", "docs", "examples"})
# Packaging, CI and editor files, dotfiles, JSON data and generated metadata (PKG-INFO repeats the
# README): rarely what a question is about, yet full of project words.
META_DIRS = frozenset({".github", ".gitlab", ".circleci", ".idea", ".vscode"})
META_HIDDEN = True                # every hidden folder too (.devcontainer/, an agent's .claude/ copies of the README)
META_NAMES = frozenset({"pkg-info", "manifest.in", "setup.cfg", "tox.ini", "pyproject.toml", "makefile", "noxfile.py"})
META_SUFFIXES = (".yml", ".yaml", ".toml", ".cfg", ".ini", ".lock", ".json")
# Build and legal files that read like prose or code: setup.py at the top, Sphinx's conf.py at the
# top or under a docs folder, LICENSE, COPYING, AUTHORS... (never the answer in 5,060 questions,
# often in the top 3). Not CONTRIBUTING: contributors ask the docs questions it answers.
META_BUILD = True                 # off in bench_retrieval.py's "no build files as meta"
LEGAL_NAMES = re.compile(r"(licen[cs]es?|copying|authors|contributors|notice)([-_.][\w.-]*)?$")
META_ROLE = True                  # off in bench_retrieval.py's "no meta role"
BM25_K1 = 1.2                     # how fast repeated words stop adding weight
BM25_B = 0.75                     # how much long chunks are penalized
RRF_K = 60                        # reciprocal-rank fusion constant (the usual value)
DENSE_WEIGHT = 1.0                # dense scores' weight beside lexical ones, both scaled to 1 (fuse_scores)
DENSE_MARGIN = 0.3                # a lexical lead this large leaves dense no say (fuse_scores)
DENSE_NAMED = False               # no dense for a question naming code: words rank those best (uses_dense)
DENSE_HOWTO = False               # nor for how-to questions: all-MiniLM-L6-v2 alone ranked their docs far below lexical
INDEX_VERSION = 7                 # bump when chunking or tokenization changes (cached indexes are rebuilt)

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Pieces of an identifier: "HTTPServerError2" -> HTTP, Server, Error, 2; "order_total" -> order, total.
IDENTIFIER_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Question words that say nothing about the code (file extensions included: "setup.py" -> setup).
STOPWORDS = frozenset(
    "a an and are as at be by can do does for from how i if in into is it its me my of on or "
    "our should so that the their them then there these this to was we what when where which "
    "who why will with would you your py js ts md txt code file files function functions "
    "class classes method methods".split()
)
# "doesn't" is read as "doesn" and "t": the first half is no term either (a rare word, so it weighed a lot).
CONTRACTIONS = frozenset("doesn don isn aren wasn weren didn won shouldn couldn wouldn hasn haven ll ve".split())
MORE_STOPWORDS: frozenset = frozenset()  # bench_retrieval.py "more stop words": a longer list cost more than it gained


@dataclass(frozen=True)
class Snippet:
    """Lines start_line..end_line (1-based, inclusive) of ``path`` (repository-relative, '/')."""

    path: str
    start_line: int
    end_line: int
    score: float
    text: str
    key: str = field(default="", repr=False, compare=False)  # the raw relative path: printable(path) is not one-to-one


# --------------------------------------------------------------------------- the whole story

def select_context(question, repo_root, k=DEFAULT_TOP_FILES, embed=None, cache_dir=None,
                   budget=CONTEXT_CHAR_BUDGET, exclude=()) -> list[Snippet]:
    """The best snippets for ``question`` from the ``k`` most relevant files, within ``budget`` characters.

    ``embed``: optional ``embed(texts) -> vectors`` (e.g. LiteLLMEmbedder); without it, offline only.
    ``cache_dir``: where indexes and vectors are cached (default: config.default_cache_dir()).
    ``exclude``: repository-relative path prefixes never shown (lab_data: the lab's own test data).
    Returns [] when nothing in the repository shares a word with the question.
    """
    if cache_dir is None:
        from config import default_cache_dir

        cache_dir = default_cache_dir()
    index = load_index(repo_root, cache_dir)                  # 1-2. walk and chunk (cached)
    if index.n_chunks == 0 or k < 1:
        return []
    terms, intent = question_terms(question), question_intent(question)
    scores = lexical_scores(index, question, terms, intent)   # 3. score
    if embed is not None and uses_dense(question, intent):  # + dense vectors, if configured
        try:
            dense = dense_chunk_scores(index, question, embed, cache_dir, intent)
        except EmbeddingFailed as exc:  # the run goes on: lexical context is still good context
            print(f"context: embeddings unavailable ({exc}); using lexical context only", file=sys.stderr)
        else:
            scores = keep_doc_places(index, scores, fuse_scores(scores, dense, DENSE_WEIGHT))
    if exclude:
        hidden = np.array([f[0].startswith(tuple(exclude)) for f in index.files] or [False])
        scores = np.where(hidden[index.chunk_file], 0, scores)
    return pick_snippets(index, scores, terms, k, budget)     # 4. pick (render_snippets: 5.)


def load_index(repo_root, cache_dir=None) -> LexicalIndex:
    """Every visible file of the repository, chunked and counted (context_index.py keeps it cached)."""
    return context_index.load_index(repo_root, RECIPE, cache_dir)


# --------------------------------------------------------------------------- words

_terms_memo: dict = {}  # word -> identifier_terms; (word,) -> index_terms; (piece, "") -> the piece's stem


def identifier_terms(word: str) -> tuple[str, ...]:
    """'SecureCookieSession' -> ('securecookiesession', 'secure', 'cookie', 'session'); 'Cookies' -> ('cookie',).

    An identifier made of several snake_case / CamelCase parts counts as itself (lowercased: the
    exact name is strong evidence) and as each part, plurals folded. A plain word counts once, as
    its singular: a plural in a question must not count twice. Memoized: a repository repeats the
    same identifiers endlessly.
    """
    terms = _terms_memo.get(word)
    if terms is None:
        whole = word.lower()
        pieces = [p.lower() for p in IDENTIFIER_PART.findall(word) if len(p) > 1]
        parts = [_fold_plural(p) for p in pieces]
        if pieces == [whole.strip("_")]:
            terms = tuple(parts)  # a plain word ('cookies', '_cache', 'HTTP')
        else:
            terms = tuple(dict.fromkeys([whole, *parts]))
        _terms_memo[word] = terms
    return terms


def _fold_plural(word: str) -> str:
    """'cookies' -> 'cookie', 'queries' -> 'query', 'classes' -> 'class', 'matches' -> 'match';
    'status', 'this', 'class' stay as they are. English plurals, roughly: a wrong fold costs little
    as long as question and code fold the same way."""
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4 and not word.endswith(("kies", "vies")):  # not cookies, movies
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "shes", "ches")) and not word.endswith("aches"):  # not caches
        return word[:-2]
    return word[:-1]


def question_terms(question: str) -> list[str]:
    """The question's distinct terms, without the words that say nothing about code."""
    stop = STOPWORDS | MORE_STOPWORDS | CONTRACTIONS
    if ERROR_MODULE is not None:
        question = ERROR_MODULE.sub("", question)
    words = [w for w in IDENTIFIER.findall(question) if w.lower() not in stop]
    terms = [t for w in words for t in index_terms(w) if len(t) > 1]
    if OPTION_LETTER is not None:  # "respond to -h as well": the index holds "h" from "-h" in code and docs
        terms += [letter.lower() for letter in OPTION_LETTER.findall(question)]
    return [t for t in dict.fromkeys(terms) if t not in stop]


def question_intent(question: str) -> str:
    """'test' when the question asks about tests ("Where is slugify tested?"), 'howto' when it asks
    how to do something ("How do I deploy with gunicorn?"), else 'code'. A how-to question that
    also asks where the code does it ("..., and where is that implemented?") is 'code'.

    Picks the file-role weights (INTENT_WEIGHTS). 'test_client' is an identifier, not the word.
    """
    words = {w.lower() for w in IDENTIFIER.findall(OWN_TESTS.sub(" ", question) if OWN_TESTS else question)}
    if words & TEST_WORDS or (CHECKED_WHERE is not None and CHECKED_WHERE.search(question)):
        return "test"
    if IMPLEMENTED_WHERE is not None and IMPLEMENTED_WHERE.search(question):
        return "code"
    if HOWTO.search(question):
        return "howto"
    if any(p is not None and p.search(question) for p in (CONCEPT, USER_GOAL)) and not CODE_NAME.search(question):
        return "howto"
    return "code"


# --------------------------------------------------------------------------- chunking

def file_role(rel: str) -> str:
    """'source', 'test', 'doc', 'changelog' or 'meta', from the path alone: 'tests/test_app.py' -> 'test'."""
    *folders, name = rel.lower().split("/")
    if CHANGELOG_NAMES.match(name):
        return "changelog"
    if META_ROLE and (any(f in META_DIRS or f.endswith(".egg-info") or (META_HIDDEN and f.startswith(".")) for f in folders)
            or name in META_NAMES or name.endswith(META_SUFFIXES) or name.startswith(".")
            or META_BUILD and (name == "setup.py" and not folders
                               or name == "conf.py" and (not folders or folders[0] in DOC_DIRS)
                               or LEGAL_NAMES.match(name) and not name.endswith(".py"))):
        return "meta"
    if (TEST_DIRS.intersection(folders) or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
            or TEST_NAMES and (name in ("test.py", "tests.py") or any(TEST_NAMES.match(f) for f in folders))):
        return "test"
    if DOC_DIRS.intersection(folders) or name.endswith(DOC_SUFFIXES):
        return "doc"
    return "source"


def index_file(tree: TreeReader, rel: str) -> tuple[str, FileChunks | None]:
    """Read, chunk and count one file: (content hash, FileChunks); None instead for a binary file.

    The counts are of raw identifiers (``order_total``); context_index splits them into terms once
    per distinct identifier, not once per occurrence. A top-level function so that worker
    processes can run it.
    """
    data = read_bytes(tree, rel)
    text = as_text(data)
    digest = content_hash(data)
    if text is None:
        return digest, None
    lines = split_lines(text)
    # A file's name is strong evidence of its topic; __init__ and __main__ say nothing about it.
    in_path = [w for w in IDENTIFIER.findall(rel.rsplit(".", 1)[0]) if not (DUNDER_PATHS and w.startswith("__"))]
    path_words = in_path * PATH_WEIGHT
    spans, sizes, entries, counts, own_counts = array("i"), array("i"), [], [], []  # lists grow faster; arrays at the end
    words: dict[str, int] = defaultdict()
    words.default_factory = words.__len__  # the file's identifiers, numbered in order of first sight
    titles = headings(lines) if rel.lower().endswith(DOC_SUFFIXES) and HEADING_WEIGHT else None
    title_words: list[str] = []
    is_python = rel.endswith(".py") and NAME_WEIGHT > 0
    for start, end in spans_of_lines(rel, lines, titles):  # a doc page's headings are found once
        if titles and start in titles:  # a long section's windows share its heading path
            title_words = IDENTIFIER.findall(" ".join(titles[start])) * HEADING_WEIGHT
        own = IDENTIFIER.findall("\n".join(lines[start - 1:end]))
        if own:  # blank lines between definitions carry nothing
            name = _definition_name(lines, start, end) if is_python else None
            found = Counter(own)
            text = list(found.values())  # the chunk's own counts; the boosts below add to them, or add words (0 here)
            found.update(path_words + title_words + [name] * NAME_WEIGHT if name else path_words + title_words)
            spans.extend((start, end))
            sizes.append(len(found))
            entries.extend(map(words.__getitem__, found))
            counts.extend(found.values())
            own_counts.extend(text)
            own_counts.extend([0] * (len(found) - len(text)))
    return digest, FileChunks(digest, spans, sizes, "\n".join(words), array("i", entries), array("i", counts),
                              array("i", own_counts))


def _definition_name(lines, start: int, end: int) -> str | None:
    """The name a chunk defines (``def order_total`` -> 'order_total'), read from its first
    definition line (after decorators), or None for the code between definitions."""
    for line in lines[start - 1:min(end, start + 20)]:
        stripped = line.lstrip()
        if stripped.startswith("@"):
            continue
        match = DEFINITION.match(stripped)
        if match:
            name = IDENTIFIER.search(stripped, match.end())
            return name.group() if name else None
        return None
    return None


def index_terms(word: str) -> tuple[str, ...]:
    """identifier_terms, each also stemmed (stem): what the index and the question are matched on.

    Memoized per identifier, and each lowered piece's folded stem once per repository (a big one
    has ~84,000 distinct identifiers made of far fewer pieces). Built from the pieces directly, it
    gives what stemming identifier_terms(word) gives: stem(whole) first for a compound, then each
    piece's stem, repeats dropped.
    """
    if not STEM:
        return identifier_terms(word)
    memo = _terms_memo  # keys: word -> identifier_terms; (word,) -> index_terms; (piece, "") -> its stem
    terms = memo.get((word,))
    if terms is None:
        whole = word.lower()
        pieces = [p.lower() for p in IDENTIFIER_PART.findall(word) if len(p) > 1]
        stems = [] if pieces == [whole.strip("_")] else [stem(whole)]  # a plain word counts once
        for piece in pieces:
            cut = memo.get((piece, ""))
            if cut is None:
                cut = memo[(piece, "")] = stem(_fold_plural(piece))
            stems.append(cut)
        terms = memo[(word,)] = tuple(dict.fromkeys(stems))
    return terms


def stem(term: str) -> str:
    """'compared', 'comparing', 'compare' -> 'compar'; 'cached', 'cache' -> 'cach'; 'serialised',
    'serialized' -> 'serializ'. Crude on purpose: a question and the code fold the same way, so a
    wrong cut costs little. Identifiers with an underscore, short words and words with digits stay
    as they are."""
    if ISE is not None and "is" in term and term.isalpha():  # ISE only matches an "is...": skip its scan otherwise
        term = ISE.sub(r"iz\1", term)
    if len(term) <= 4 or not term.endswith(("ing", "ed", "e")) or not term.isalpha():
        return term
    for suffix in ("ing", "ed"):
        if term.endswith(suffix) and len(term) - len(suffix) >= 4:
            term = term[:-len(suffix)]
            if term[-1] == term[-2] and term[-1] not in "lsz":  # stopped -> stop, but called -> call
                term = term[:-1]
            break
    return term[:-1] if term.endswith("e") and term[-2] not in "aeiou" else term  # cookie, value stay


RECIPE = context_index.Recipe(INDEX_VERSION, index_file, index_terms)


# --------------------------------------------------------------------------- scoring

def score_chunks(index: LexicalIndex, terms, intent: str = "code") -> np.ndarray:
    """BM25 score of every chunk (the dot product of the question's and the chunk's vectors),
    times the chunk's file-role weight (ROLE_WEIGHTS, with the question intent's INTENT_WEIGHTS).

    Chunk side: the term's count, saturated and length-adjusted. Question side: the term's
    rarity (IDF; over files for a question about tests, TEST_FILE_IDF), so "session" outweighs
    "get". Each chunk also gets FILE_WEIGHT of its whole
    file's BM25 score (the file's counts summed over its chunks): of two equal chunks, the one in
    a file about the question's subject wins.
    """
    norm = _chunk_norm(index)
    total = np.zeros(index.n_chunks, dtype=np.float64)
    whole = np.zeros(len(index.files), dtype=np.float64) if FILE_WEIGHT else None
    file_norm = _file_norm(index) if FILE_WEIGHT else None
    by_file = bool(TEST_FILE_IDF) and intent == "test"
    for term in terms:
        counts = index.term_counts(term)
        if counts is None:
            continue
        in_file = np.bincount(index.chunk_file, weights=counts, minlength=len(index.files)) \
            if whole is not None or by_file else None
        idf = _idf(index, counts, in_file if by_file else None)
        total += idf * counts * (BM25_K1 + 1) / (counts + norm)
        if whole is not None:
            whole += idf * in_file * (BM25_K1 + 1) / (in_file + file_norm)
    if whole is not None:
        total += FILE_WEIGHT * whole[index.chunk_file]
    return total * role_prior(index, intent)


def lexical_scores(index: LexicalIndex, question: str, terms=None, intent=None) -> np.ndarray:
    """score_chunks for the question's terms and intent; a how-to question also gets its
    literal_scores, LITERAL_WEIGHT of them, scaled to the same best score."""
    terms = question_terms(question) if terms is None else terms
    intent = question_intent(question) if intent is None else intent
    scores = score_chunks(index, terms, intent)
    if intent != "howto" or not LITERAL_WEIGHT:
        return scores
    literal = literal_scores(index, question) * role_prior(index, intent)
    best, best_literal = float(scores.max(initial=0.0)), float(literal.max(initial=0.0))
    if best_literal > 0:
        scores = scores + LITERAL_WEIGHT * literal * ((best or 1.0) / best_literal)
    return scores


def literal_scores(index: LexicalIndex, question: str) -> np.ndarray:
    """BM25 of every word of the question, stop words too, over each chunk's own text (without the
    words its path, heading or name add), with no file score.

    "How do I ...", "can I ...", "you should ...": the docs are written in the words a how-to
    question is asked in, and code rarely uses them, so here those words are evidence. The path
    and name boosts that serve questions about code favour code files for these questions
    (bench/README.md: doc questions, MRR +0.033 over the twelve sets that have them).
    """
    norm = _chunk_norm(index, own=True)
    total = np.zeros(index.n_chunks, dtype=np.float64)
    for term in dict.fromkeys(t for w in IDENTIFIER.findall(question) for t in index_terms(w) if len(t) > 1):
        counts = index.term_counts(term, own=True)
        if counts is not None and counts.any():  # not a word only the path, heading or name has
            total += _idf(index, counts) * counts * (BM25_K1 + 1) / (counts + norm)
    return total


def _chunk_norm(index: LexicalIndex, own: bool = False) -> np.ndarray:
    """BM25's length adjustment per chunk, k1 (1 - b + b length / mean length), once per index
    (``own``: the lengths of the chunks' own text, for literal_scores)."""
    key = "bm25_own_norm" if own else "bm25_norm"
    norm = index.memo.get(key)
    if norm is None:
        length = index.own_length if own else index.chunk_length
        mean = float(length.mean()) if index.n_chunks else 1.0
        norm = index.memo[key] = BM25_K1 * (1 - BM25_B + BM25_B * length / max(mean, 1.0))
    return norm


def _idf(index: LexicalIndex, counts, in_file=None) -> float:
    """A term's rarity over the chunks, from its counts in each; given ``in_file`` (its counts
    summed per file), over the files that have chunks."""
    if in_file is not None:
        files = index.memo.get("chunked_files")
        if files is None:
            files = index.memo["chunked_files"] = np.count_nonzero(np.bincount(index.chunk_file))
        df = np.count_nonzero(in_file)
        return np.log1p((files - df + 0.5) / (df + 0.5))
    df = np.count_nonzero(counts)
    return np.log1p((index.n_chunks - df + 0.5) / (df + 0.5))


def _file_norm(index: LexicalIndex) -> np.ndarray:
    """BM25's length adjustment for whole files, as score_chunks' for chunks."""
    norm = index.memo.get("bm25_file_norm")
    if norm is None:
        length = np.bincount(index.chunk_file, weights=index.chunk_length, minlength=len(index.files))
        mean = float(length[length > 0].mean()) if length.any() else 1.0
        norm = index.memo["bm25_file_norm"] = BM25_K1 * (1 - BM25_B + BM25_B * length / max(mean, 1.0))
    return norm


def role_prior(index: LexicalIndex, intent: str = "code") -> np.ndarray:
    """Per chunk: its file's role weight for a question of this intent (see question_intent)."""
    prior = index.memo.get(f"role_prior:{intent}")
    if prior is None:
        weights = {**ROLE_WEIGHTS, **INTENT_WEIGHTS.get(intent, {})}
        role_weight = np.array([weights[role] for role in file_roles(index)] or [1.0])
        prior = index.memo[f"role_prior:{intent}"] = role_weight[index.chunk_file]
    return prior


def file_roles(index: LexicalIndex) -> list[str]:
    """file_role of each of the index's files, in order, worked out once per index."""
    roles = index.memo.get("file_roles")
    if roles is None:
        roles = index.memo["file_roles"] = [file_role(rel) for rel, *_ in index.files]
    return roles


def dense_chunk_scores(index: LexicalIndex, question: str, embed, cache_dir, intent: str = "code") -> np.ndarray:
    """Embedding similarity per chunk, as evidence the file-role weights can scale.

    An embedding model's cosine similarities sit in a narrow band well above zero (e5: about
    0.7-0.9 for every chunk), so a 0.7 weight applied to them directly would sink every doc chunk
    below every code chunk. Counted from the repository's least similar chunk, the weights scale
    what the question and the chunk share instead (bench_retrieval.py --dense: fused MRR +.037,
    95% interval [+.008, +.071], over weighting the raw similarity; 128 questions, e5-small).
    """
    similarity = dense_scores(index, question, embed, cache_dir)
    return (similarity - similarity.min()) * role_prior(index, intent)


def fuse_scores(lexical, dense, weight: float, margin: float | None = None) -> np.ndarray:
    """Lexical scores plus dense ones, each scaled to its repository maximum, dense times ``weight``
    as long as lexical has no clear winner: the weight shrinks to 0 as the best chunk's lead over
    the second grows to ``margin`` (DENSE_MARGIN) of the best score.

    Rank fusion gives a chunk that the lexical ranking puts second nearly what it gives the first
    (1/62 against 1/61), so even a weak dense opinion reorders the top. Adding scaled scores still
    let a small model (all-MiniLM-L6-v2) push clear lexical winners down on error and doc questions;
    when lexical leads by DENSE_MARGIN or more, the fused order is the lexical one
    (bench/README.md, bench_retrieval.py --dense-margins).
    """
    margin = DENSE_MARGIN if margin is None else margin
    top_lexical, top_dense = float(np.max(lexical, initial=0.0)), float(np.max(dense, initial=0.0))
    fused = lexical / top_lexical if top_lexical > 0 else np.zeros(len(lexical))
    second = float(np.partition(fused, -2)[-2]) if len(fused) > 1 else 0.0
    lead = 1.0 - second if top_lexical > 0 else 0.0  # no lexical evidence at all: dense decides
    weight *= max(0.0, 1.0 - lead / margin) if margin > 0 else 0.0
    return fused + (weight * dense / top_dense if top_dense > 0 and weight > 0 else 0.0)


def uses_dense(question: str, intent: str) -> bool:
    """Whether an embedding model has a say on ``question``: not when it names code (an identifier,
    a backticked name, an exception: words find those) nor when it asks how to do something.

    all-MiniLM-L6-v2 over 1,585 tuning questions, fused on these alone: paraphrase +0.034, test
    +0.049, the other styles level; fused on named ones too, it had gained identifier questions
    0.006. A named question costs no embedding call (bench/README.md, sixth round)."""
    if intent == "howto" and not DENSE_HOWTO:
        return False
    return DENSE_NAMED or not CODE_NAME.search(question)


def keep_doc_places(index: LexicalIndex, lexical, fused) -> np.ndarray:
    """``fused`` chunk scores, rescaled file by file so that each doc page keeps the place among
    files that ``lexical`` gave it, and the other files fill the places left in ``fused``'s order.

    all-MiniLM-L6-v2 alone ranks doc pages far below where the words do: added to lexical scores,
    it pushed code files over the right doc page. A file's score is linear in its chunks' scores
    (file_scores), so scaling a file's chunks sets its rank and keeps their order within it."""
    fused = np.asarray(fused, dtype=np.float64)
    by_lexical, by_fused = file_scores(index, lexical), file_scores(index, fused)
    is_doc = np.array([role == "doc" for role in file_roles(index)] or [False])
    lexical_order = np.argsort(-by_lexical, kind="stable")
    lexical_order = lexical_order[by_lexical[lexical_order] > 0]
    fused_order = np.argsort(-by_fused, kind="stable")
    fused_order = fused_order[by_fused[fused_order] > 0]
    order = [f for f in fused_order.tolist() if not is_doc[f]]  # the other files, as fused ranks them
    for place, f in enumerate(lexical_order.tolist()):  # then each doc page at its lexical place
        if is_doc[f]:
            order.insert(place, f)  # (past the end when the other files ran out: appended)
    # The fused file scores, best first, handed out in the new order (strictly falling: no ties to reorder).
    target = np.sort(by_fused[order])[::-1] * (1.0 - 1e-6 * np.arange(len(order)))
    scale = np.zeros(len(index.files))
    scale[order] = target / np.maximum(by_fused[order], 1e-300)
    return fused * scale[index.chunk_file]


def fuse_rankings(*score_arrays, weights=None) -> np.ndarray:
    """Reciprocal-rank fusion: each ranking gives a chunk weight/(RRF_K + rank); the sums are compared.

    Chunks with a zero score in a ranking get nothing from it (no evidence is not evidence).
    ``weights``: one per ranking (default 1 each). bench_retrieval.py compares it with fuse_scores.
    """
    fused = np.zeros(len(score_arrays[0]), dtype=np.float64)
    for scores, weight in zip(score_arrays, weights or [1.0] * len(score_arrays)):
        order = np.argsort(-scores, kind="stable")
        ranks = np.empty(len(scores), dtype=np.float64)
        ranks[order] = np.arange(1, len(scores) + 1)
        fused += np.where(scores > 0, weight / (RRF_K + ranks), 0.0)
    return fused


# --------------------------------------------------------------------------- selecting snippets

def file_scores(index: LexicalIndex, scores) -> np.ndarray:
    """Per file: its best chunk's score, plus SECOND_CHUNK_WEIGHT times its second best's (a file
    that answers with two chunks is more likely the topic than one that mentions it once)."""
    scores = np.asarray(scores, dtype=np.float64)
    best = np.zeros(len(index.files))
    if not SECOND_CHUNK_WEIGHT:
        np.maximum.at(best, index.chunk_file, scores)
        return best
    order = np.argsort(-scores, kind="stable")
    order = order[scores[order] > 0]
    files = index.chunk_file[order]
    _, first = np.unique(files, return_index=True)
    best[files[first]] = scores[order[first]]
    rest = np.ones(len(order), bool)
    rest[first] = False
    _, second = np.unique(files[rest], return_index=True)
    best[files[rest][second]] += SECOND_CHUNK_WEIGHT * scores[order[rest][second]]
    return best


def pick_snippets(index: LexicalIndex, scores, terms, k: int, budget: int) -> list[Snippet]:
    """The best chunk of each of the top-k files first, then their next-best chunks while budget lasts.

    Every one of the k files keeps its snippet: when their best chunks are more than ``budget``
    together, they are cut down to the lines around the question's words, the lowest-ranked
    first (_fit).
    """
    order = np.argsort(-scores, kind="stable")
    order = order[scores[order] > 0]
    files = index.chunk_file[order]
    ranked = file_scores(index, scores)
    top = np.argsort(-ranked, kind="stable")[:k]
    top = top[ranked[top] > 0]                                # the k best files, best first
    per_file = [order[files == f][:MAX_SNIPPETS_PER_FILE] for f in top]
    read: dict[str, list[str]] = {}
    chosen = _fit([_snippet(index, int(c[0]), float(scores[c[0]]), terms, read) for c in per_file], budget, terms)
    used = sum(len(s.text) for s in chosen)
    for chunk in sorted((int(c) for chunks in per_file for c in chunks[1:]), key=lambda c: -scores[c]):
        snippet = _snippet(index, chunk, float(scores[chunk]), terms, read)
        if used + len(snippet.text) <= budget:
            chosen.append(snippet)
            used += len(snippet.text)
    return chosen


def _snippet(index: LexicalIndex, chunk: int, score: float, terms, read: dict) -> Snippet:
    rel = index.chunk_path(chunk)
    if rel not in read:
        read[rel] = file_lines(index, rel)
    lines = read[rel]
    start, end = int(index.chunk_start[chunk]), min(int(index.chunk_end[chunk]), len(lines))
    if end - start + 1 > SNIPPET_MAX_LINES:
        first = start
        start = _best_window(lines, start, end, set(terms))
        end = start + SNIPPET_MAX_LINES - 1
        start, end = whole_statements(rel, lines, first, start, end)  # never stop inside a statement
    return Snippet(printable(rel), start, end, round(score, 4), "\n".join(lines[start - 1:end]), rel)


def _best_window(lines, start: int, end: int, terms: set) -> int:
    """First line of the SNIPPET_MAX_LINES-line window of start..end with the most question terms."""
    hits = _line_hits(lines[start - 1:end], terms)
    sums = np.convolve(hits, np.ones(SNIPPET_MAX_LINES, dtype=int), mode="valid")
    return start + int(np.argmax(sums)) if len(sums) else start


def _line_hits(lines, terms: set) -> list[int]:
    """How many of the question's terms each line holds."""
    return [len(terms.intersection([t for w in set(IDENTIFIER.findall(line)) for t in index_terms(w)]))
            for line in lines]


def _fit(snippets: list[Snippet], budget: int, terms) -> list[Snippet]:
    """The snippets (best file first), cut so that all of them fit in ``budget``.

    The lowest-ranked are cut first, each to no less than half an equal share: the best file is the
    likeliest answer, so it keeps its whole chunk when the others can make room. If that is not
    enough, the longest are cut to fair shares (shortest served first).
    """
    fitted = list(snippets)
    excess = sum(len(s.text) for s in fitted) - budget
    floor = budget // (2 * len(fitted)) if fitted else 0
    for i in reversed(range(len(fitted))):
        if excess <= 0:
            return fitted
        size = len(fitted[i].text)
        if size > floor:
            fitted[i] = _cut(fitted[i], max(floor, size - excess), set(terms))
            excess -= size - len(fitted[i].text)
    if excess <= 0:
        return fitted
    left = budget
    for served, i in enumerate(sorted(range(len(fitted)), key=lambda i: len(fitted[i].text))):
        share = left // (len(fitted) - served)
        if len(fitted[i].text) > share:
            fitted[i] = _cut(fitted[i], share, set(terms))
        left -= len(fitted[i].text)
    return fitted


def _cut(snippet: Snippet, limit: int, terms: set) -> Snippet:
    """At most ``limit`` characters of ``snippet``: its line richest in question terms, and the
    lines around it while they fit, then whole statements only (Python); a single line longer
    than that is cut, marked with '…'."""
    lines = snippet.text.split("\n")
    hits = _line_hits(lines, terms)
    first = last = best = hits.index(max(hits))
    size = len(lines[first])
    grown = True
    while grown:
        grown = False
        if last + 1 < len(lines) and size + 1 + len(lines[last + 1]) <= limit:  # below first: code reads down
            last, size, grown = last + 1, size + 1 + len(lines[last + 1]), True
        if first > 0 and size + 1 + len(lines[first - 1]) <= limit:
            first, size, grown = first - 1, size + 1 + len(lines[first - 1]), True
    first, last = (n - 1 for n in whole_statements(snippet.path, lines, 1, first + 1, last + 1, keep=best + 1, grow=False))
    text = "\n".join(lines[first:last + 1])
    if len(text) > limit:
        text = text[:limit - 1] + "…" if limit > 0 else ""
    return replace(snippet, start_line=snippet.start_line + first, end_line=snippet.start_line + last, text=text)


def render_snippets(snippets) -> str:
    """Snippets as numbered lines under a header, the way read_file shows them (cite path:line)."""
    blocks = []
    for s in snippets:
        body = "\n".join(f"{s.start_line + i:>5}| {line}" for i, line in enumerate(s.text.split("\n")))
        blocks.append(f"[Snippet: {s.path} lines {s.start_line}-{s.end_line} (score {s.score:.3g})]\n{body}")
    return "\n\n".join(blocks)


# --------------------------------------------------------------------------- the lab's own test data

# Inside code/: scripted model replies with invented answers ("a 19% VAT, configured in
# shop/config.py:12"), fake providers, the fixture repository, the question sets with their
# expected answers, and the benchmark notes quoting a local model's wrong answers about the lab.
# A question about the lab is answered from its code, never from these.
LAB_DATA = ("eval/", "fixture_repo/", "bench/retrieval_questions", "bench/questions_v", "bench/README.md", "harness/scripted.py",
            "harness/fake_server.py", "harness/native_fakes.py", "harness/misbehaving.py",
            "harness/strict_provider.py")


def lab_data(repo_root) -> tuple[str, ...]:
    """LAB_DATA relative to ``repo_root`` when that repository holds this lab's code/ (code/ itself
    or the lab's checkout), for select_context's ``exclude``; () for any other repository."""
    code, root = Path(__file__).resolve().parent, Path(repo_root).resolve()
    if not code.is_relative_to(root):
        return ()
    prefix = code.relative_to(root).as_posix()
    return tuple(p if prefix == "." else f"{prefix}/{p}" for p in LAB_DATA)
