"""Issue 29's ranking choices, each checked for what it is for: doc pages by section with their
heading path, the name a chunk defines, folded word endings (British -ise spellings too), the
question's intent, an option's letter ("-h") and the exception module left out of a pasted error."""

from __future__ import annotations

import chunking
import context_selector as cs

RST = """Signing
=======

Intro words.

Key rotation
------------

A list of secrets is tried in turn.

Salts
-----

Namespaces for signatures.
"""

MD = """# Init

```python
# not a heading inside a fence
```

## Defaults

Fresh lists.
"""


def test_rst_and_markdown_headings_give_section_starts_and_paths():
    lines = RST.split("\n")
    found = chunking.headings(lines)
    assert found == {1: ("Signing",), 6: ("Signing", "Key rotation"), 11: ("Signing", "Salts")}
    md = chunking.headings(MD.split("\n"))
    assert md == {1: ("Init",), 7: ("Init", "Defaults")}  # the fenced comment is no heading


def test_a_doc_page_is_chunked_by_section():
    assert chunking.chunk_spans("docs/signing.rst", RST) == [(1, 5), (6, 10), (11, 14)]
    assert chunking.chunk_spans("notes.log", RST) == [(1, 14)]  # not a doc page: windows


def test_the_section_that_answers_is_the_snippet(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "signing.rst").write_text(RST)
    (tmp_path / "app.py").write_text("def sign(value):\n    return value\n")
    snippets = cs.select_context("why rotate keys?", tmp_path, k=1, cache_dir=tmp_path / "cache")
    assert snippets and snippets[0].path == "docs/signing.rst" and snippets[0].start_line == 6, snippets


def test_the_defined_name_outweighs_a_mention(tmp_path):
    (tmp_path / "a.py").write_text("def other():\n    return render_page(1) + render_page(2)\n")
    (tmp_path / "b.py").write_text("def render_page(n):\n    return n\n")
    snippets = cs.select_context("what does render_page do?", tmp_path, k=2, cache_dir=tmp_path / "cache")
    assert [s.path for s in snippets][:1] == ["b.py"], snippets


def test_endings_fold_the_same_way_in_questions_and_code():
    assert cs.stem("compared") == cs.stem("compare") == cs.stem("comparing")
    assert cs.stem("cached") == cs.stem("cache")
    assert cs.stem("cookie") == "cookie" and cs.stem("status") == "status" and cs.stem("order_total") == "order_total"


def test_why_questions_without_code_names_ask_the_docs():
    assert cs.question_intent("Why isn't HTML escaping on by default?") == "howto"
    assert cs.question_intent("What is the difference between null and blank?") == "howto"
    assert cs.question_intent("Why does `Signer.sign` add a dot?") == "code"  # a name from the code
    assert cs.question_intent("How does the session cookie get signed?") == "code"


def test_a_users_yes_no_questions_and_wishes_ask_the_docs(monkeypatch):
    for question in ("Can several workers share one job store?", "My job missed three runs. Will it run them all?",
                     "I want users to pick their own colours, how?", "Templates reload on every request, possible?",
                     "The date still validates. bug?", "I'd rather it ran once."):
        assert cs.question_intent(question) == "howto", question
    assert cs.question_intent("Can `add_job` take a list?") == "code"  # a name from the code
    assert cs.question_intent("Where is a missed run dropped?") == "code"
    assert cs.question_intent("When a run is missed, how is the next one worked out?") == "code"  # how the code works
    monkeypatch.setattr(cs, "USER_GOAL", None)
    assert cs.question_intent("Can several workers share one job store?") == "code"


def test_an_exceptions_module_path_is_left_out_of_a_pasted_error():
    terms = cs.question_terms("jinja2.exceptions.UndefinedError: 'dict object' has no attribute 'title'")
    assert "undefinederror" in terms and "exception" not in terms and "jinja2" not in terms
    assert "exception" in cs.question_terms("how are exceptions raised?")


def test_british_spellings_meet_the_codes_american_ones():
    assert cs.stem("serialised") == cs.stem("serialized") == cs.stem("serialize")
    assert cs.stem("customising") == cs.stem("customize") and cs.stem("serialisation") == cs.stem("serialization")
    assert cs.stem("raise") == "rais" and cs.stem("analysis") == "analysis"  # too short before -ise; no -ise ending


def test_a_command_line_options_letter_is_a_term():
    terms = cs.question_terms("How can I make the help option respond to -h as well as --help?")
    assert "h" in terms and "help" in terms
    assert "e" not in cs.question_terms("an e-mail address")  # a hyphenated word is no option
    assert "x" not in cs.question_terms("x and y")  # a single letter otherwise says nothing


def test_a_question_in_british_spelling_finds_the_section(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "extending.rst").write_text(
        "Extending\n=========\n\nCustomize how values are serialized\n-----------------------------------\n\n"
        "Pass a value serializer that is called for every value.\n")
    (tmp_path / "convert.py").write_text("def how_values(values):\n    return [value for value in values]\n")
    snippets = cs.select_context("How do I customise how values are serialised?", tmp_path, k=1,
                                 cache_dir=tmp_path / "cache")
    assert snippets and snippets[0].path == "docs/extending.rst", snippets


def _howto_repo(tmp_path):
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "proxy").mkdir()
    (root / "proxy" / "client_address.py").write_text(
        'def forwarded_client_address(headers):\n    """The client address a proxy forwarded in its headers."""\n'
        '    return headers.get("X-Forwarded-For", "").split(",")[0].strip()\n\n\n'
        'def trusted_proxy(headers, proxies):\n    return headers.get("X-Real-Ip") in proxies\n')
    (root / "docs" / "hosting.md").write_text(
        "# Deploying\n\n## Behind a proxy\n\nWhen you run it behind a proxy, this is how you do it: tell it how many\n"
        "hops there are in front of it, and it will see what you want to see.\n\n## Workers\n\n"
        "Start as many workers as you have cores.\n")
    for i in range(6):
        (root / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    return cs.load_index(root, tmp_path / "cache")


def _best_file(index, scores):
    return index.files[int(cs.file_scores(index, scores).argmax())][0]


def test_a_how_to_question_also_weighs_its_plain_words_in_the_chunks_own_text(tmp_path, monkeypatch):
    """The docs answer in the question's own words ("how", "you", "run", "when"); the source file
    matches by its path and definition names, which the literal score leaves out."""
    index = _howto_repo(tmp_path)
    question = "How do I make it see the real client address when I run behind a proxy?"
    assert cs.question_intent(question) == "howto"
    assert _best_file(index, cs.lexical_scores(index, question)) == "docs/hosting.md"
    monkeypatch.setattr(cs, "LITERAL_WEIGHT", 0)  # as before: the path and name words win
    assert _best_file(index, cs.lexical_scores(index, question)) == "proxy/client_address.py"


def test_the_literal_score_counts_a_chunks_own_text_not_its_path_or_name(tmp_path):
    index = _howto_repo(tmp_path)
    first = [c for c in range(index.n_chunks) if index.chunk_path(c) == "proxy/client_address.py"][0]
    assert cs.score_chunks(index, ["client"])[first] > 0 and cs.literal_scores(index, "client")[first] > 0
    assert index.term_counts("client")[first] > index.term_counts("client", own=True)[first] > 0  # path, name added
    assert cs.score_chunks(index, list(cs.index_terms("hosting"))).max() > 0  # the page's path holds it...
    assert cs.literal_scores(index, "hosting").max() == 0  # ...its text does not
    assert cs.literal_scores(index, "how").max() > 0  # a stop word counts here


def test_only_how_to_questions_get_the_literal_score(tmp_path):
    index = _howto_repo(tmp_path)
    question = "Where does forwarded_client_address read the header?"
    assert cs.question_intent(question) == "code"
    assert (cs.lexical_scores(index, question) == cs.score_chunks(index, cs.question_terms(question), "code")).all()


def test_index_terms_are_identifier_terms_stemmed_with_or_without_the_memo():
    # index_terms is built from the pieces and their memoized stems (issue 29's speed round):
    # it must give what stemming identifier_terms gives, on a first call and from the memo.
    words = ["SecureCookieSession", "order_total", "cookies", "Cookies", "HTTPServerError2", "_cache", "__init__",
             "compared_values", "SerialisedValues", "serialise", "x", "_", "a_b", "CACHES", "queries_cached", "http",
             "SessionCache", "CookieCompared", "ValueSerialiser"]
    expected = [tuple(dict.fromkeys(cs.stem(t) for t in cs.identifier_terms(w))) for w in words]
    cs._terms_memo.clear()
    assert [cs.index_terms(w) for w in words] == expected
    assert [cs.index_terms(w) for w in reversed(words)] == expected[::-1]  # now from the memo


def test_a_doc_pages_spans_are_the_same_with_its_headings_handed_in():
    lines = ["Title", "=====", "", "Intro.", "", "Part", "----", *["text"] * 120, "# not rst"]
    assert chunking.spans_of_lines("a.rst", lines, chunking.headings(lines)) == chunking.spans_of_lines("a.rst", lines)
    assert len(chunking.spans_of_lines("a.rst", lines)) > 2  # sections, the long one in windows
