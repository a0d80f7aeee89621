import re
from pathlib import Path

import nupunkt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.ingest.sentences import split_sentences
from tests.pipelines.sentence_cases import CASES, HELD_OUT_CASES, SentenceCase

CORPUS = Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"


def sentences_of(text: str) -> list[str]:
    return [text[start:end] for start, end in split_sentences(text)]


def assert_spans_contract(text: str, spans: list[tuple[int, int]]) -> None:
    previous_end = 0
    for start, end in spans:
        assert previous_end <= start < end <= len(text)
        assert not text[start].isspace() and not text[end - 1].isspace()
        assert text[previous_end:start].strip() == "", "non-whitespace text left out of every span"
        previous_end = end
    assert text[previous_end:].strip() == ""


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_labelled_case(case: SentenceCase) -> None:
    assert sentences_of(case.text) == list(case.sentences)


def test_held_out_cases_mostly_right() -> None:
    # Never tuned on; the known misses are "Exh. A." (a one-letter exhibit name read as an initial).
    num_right = sum(sentences_of(case.text) == list(case.sentences) for case in HELD_OUT_CASES)
    assert num_right >= len(HELD_OUT_CASES) - 2


def test_labelled_set_is_large_enough_and_mixed() -> None:
    domains = [case.domain for case in CASES + HELD_OUT_CASES]
    assert len(CASES) >= 60
    assert domains.count("legal") >= 30 and domains.count("medical") >= 30


@pytest.mark.parametrize(
    "sentence",
    [
        "The claim arises under 42 U.S.C. § 1983 and Acme Corp. v. Beta Ltd. controls.",
        "Take 500 mg b.i.d. or 1 g q.d. as Dr. Patel et al. advised, i.e. with food.",
        "See Fig. 2, Sec. 4, Art. 7 and No. 12 of approx. 40 items, e.g. Section 12.3 and § 2.1.",
        "Glucose stayed at 126 mg/dL after 2.5 mg of the drug.",
    ],
)
def test_abbreviations_do_not_end_sentences(sentence: str) -> None:
    assert sentences_of(f"{sentence} The next sentence follows.") == [
        sentence,
        "The next sentence follows.",
    ]


def test_blank_line_always_ends_a_sentence() -> None:
    # A blank line followed by a lowercase word would be joined by nupunkt's own layout rule.
    assert sentences_of("Uses\n\ntemporarily relieves minor aches") == [
        "Uses",
        "temporarily relieves minor aches",
    ]


def test_line_wrap_does_not_end_a_sentence() -> None:
    text = "The Licensee shall indemnify the\nLicensor against all claims. It shall\nnotify us."
    assert sentences_of(text) == [
        "The Licensee shall indemnify the\nLicensor against all claims.",
        "It shall\nnotify us.",
    ]


def test_list_marker_joins_its_item() -> None:
    assert sentences_of("1. Deliver the Goods. 2. Pay the Price. (c) Sign.") == [
        "1. Deliver the Goods.",
        "2. Pay the Price.",
        "(c) Sign.",
    ]


@pytest.mark.parametrize("text", ["", "   ", "\n\n \t\n"])
def test_blank_text_has_no_sentences(text: str) -> None:
    assert split_sentences(text) == []


def test_extra_abbreviations_do_not_leak_into_nupunkt_shared_model() -> None:
    split_sentences("Take 1 tab. twice daily.")
    assert "b.i.d" not in nupunkt.load("default").abbreviations


WORDS = st.sampled_from(
    [
        "the",
        "The",
        "Dr.",
        "U.S.C.",
        "§",
        "2.5",
        "mg/dL",
        "Inc.",
        "(a)",
        "1.",
        "end.",
        "Why?",
        "é",
        "No.",
        "v.",
        "e.g.",
        "...",
        ")",
        '"',
        "Section",
        "12.3.",
        "a",
        "—",
        "x" * 30,
    ]
)
SPACES = st.sampled_from([" ", " ", " ", "\n", "\n\n", "  \n \n", "\t", "\u00a0", "\n\n\n"])


@st.composite
def texts(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.tuples(SPACES, WORDS), max_size=60))
    return draw(SPACES) + "".join(space + word for space, word in words) + draw(SPACES)


@settings(deadline=None, max_examples=150)
@given(texts())
def test_spans_are_ordered_tight_and_lose_nothing(text: str) -> None:
    spans = split_sentences(text)
    assert_spans_contract(text, spans)
    for start, end in spans:
        assert not re.search(r"\n[^\S\n]*\n", text[start:end]), "a sentence crossed a blank line"


@settings(deadline=None, max_examples=100)
@given(st.text(max_size=300))
def test_spans_contract_holds_on_any_text(text: str) -> None:
    assert_spans_contract(text, split_sentences(text))


def test_same_text_same_spans() -> None:
    text = " ".join(case.text for case in CASES)
    assert split_sentences(text) == split_sentences(text)


@pytest.mark.slow
@pytest.mark.corpus
def test_spans_contract_on_corpus_text() -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"no corpus at {CORPUS} (the shared folder beside the checkout)")
    pypdf = pytest.importorskip("pypdf")
    paths = (
        sorted((CORPUS / "medical").glob("*.pdf"))[:2] + sorted(CORPUS.glob("legal/cuad*.pdf"))[:1]
    )
    for path in paths:
        reader = pypdf.PdfReader(path)
        text = "\n\n".join(page.extract_text() or "" for page in reader.pages[:10])
        spans = split_sentences(text)
        assert_spans_contract(text, spans)
        assert len(spans) > 10, path.name
