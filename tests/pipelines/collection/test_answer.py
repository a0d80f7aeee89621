"""Questions across a collection (pipelines.collection.answer, collection_table): citations that
name the document and page, the fallback to quotes, and the per-document table answered in one
batched model call, from key facts where they answer it."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelines.answer.from_facts import KnownFact, fact_for
from pipelines.collection.answer import RankedPassage, answer_across
from pipelines.collection.questions import asks_every_document
from pipelines.collection.sources import (
    CitedPage,
    SourceDocument,
    labels_for,
    parse_source_citations,
)
from pipelines.collection.table import FACT, MODEL, NONE, answer_each
from pipelines.retrieval.bm25 import PassageIndex
from tests.pipelines.echo_model import EchoModel, filler_page, make_document

ASSIGNMENT = "The Supplier may not assign this Agreement without the written consent of the Buyer."
NON_COMPETE = "The Employee shall not compete with the Company for two years after termination."


@dataclass
class BatchingEcho(EchoModel):
    """The echo model with complete_many, counting its calls (the engine batches them)."""

    num_batches: list[int] = field(default_factory=list)
    schemas: list[dict | None] = field(default_factory=list)  # response_schema of each call

    def complete_many(
        self,
        conversations,
        *,
        max_new_tokens,
        on_progress=None,
        on_tokens=None,
        response_schema=None,
    ):
        self.num_batches.append(len(conversations))
        self.schemas.append(response_schema)
        return [self.complete(m, max_new_tokens=max_new_tokens) for m in conversations]


def _sources(facts: dict[int, tuple] | None = None) -> dict[int, SourceDocument]:
    texts = {
        1: ("Office Lease", [filler_page(1), filler_page(2)]),
        2: ("Supply Agreement", [filler_page(1), ASSIGNMENT + "\n\n" + filler_page(2)]),
        3: ("Employment Contract", [filler_page(1), filler_page(2), NON_COMPETE]),
    }
    labels = labels_for([(i, title, "x.pdf") for i, (title, _) in texts.items()])
    return {
        i: SourceDocument(
            i, labels[i], make_document(pages, title=title), facts=(facts or {}).get(i, ())
        )
        for i, (title, pages) in texts.items()
    }


def _ranked(question: str, sources: dict[int, SourceDocument]) -> list[RankedPassage]:
    ranked = [
        RankedPassage(i, passage, score)
        for i, source in sources.items()
        for passage, score in PassageIndex(source.document.passages).rank(question)
        if score > 0
    ]
    return sorted(ranked, key=lambda r: -r.score)


def test_the_answer_cites_document_and_page() -> None:
    sources = _sources()
    question = "Can the supplier assign the agreement without consent?"
    result = answer_across(question, _ranked(question, sources), sources, EchoModel())
    assert CitedPage(2, "Supply Agreement", 2) in result.citations
    assert result.citations[0].document_id == 2
    assert result.quotes[0].document_id == 2 and result.quotes[0].evidence.page == 2
    assert "assign" in result.quotes[0].evidence.text
    assert "[Supply Agreement, p. 2]" in result.text
    # The prompt named every page by its document.
    prompt = result.stats["calls"][0] if "calls" in result.stats else None
    assert prompt is not None and result.support in ("supported", "unchecked")


def test_without_model_citations_the_quotes_pages_are_cited() -> None:
    sources = _sources()
    question = "Can the supplier assign the agreement without consent?"
    result = answer_across(question, _ranked(question, sources), sources, EchoModel(cite=False))
    assert result.stats["citation_source"] == "quotes"
    assert result.citations[0] == CitedPage(2, "Supply Agreement", 2)
    assert "Sources: [Supply Agreement, p. 2]" in result.text


def test_an_empty_answer_falls_back_to_the_best_quote() -> None:
    sources = _sources()
    question = "Which party must not compete after termination?"

    class Silent(EchoModel):
        def _answer(self, content: str) -> str:
            return ""

    result = answer_across(question, _ranked(question, sources), sources, Silent())
    assert result.support == "quoted"
    assert result.text.endswith("(quoted from [Employment Contract, p. 3])")
    assert [c.document_id for c in result.citations] == [3]


def test_nothing_ranked_is_no_answer() -> None:
    result = answer_across("Anything about rent?", [], _sources(), EchoModel())
    assert result.support == "no_answer" and result.citations == []


def test_every_document_in_one_batched_call_with_facts_first() -> None:
    fact = KnownFact(
        "non_compete", "Non-compete", "Two years after termination", quote=NON_COMPETE, page=3
    )
    sources = _sources(facts={3: (fact,)})
    model = BatchingEcho()
    question = "Which of these contracts have a non-compete clause, or may assign, in plain words?"
    result = answer_each(question, list(sources.values()), model)
    assert model.num_batches == [2]  # one call for the two documents the facts do not answer
    rows = {row.document_id: row for row in result.rows}
    assert [row.document_id for row in result.rows] == [1, 2, 3]
    assert (rows[3].source, rows[3].answer, rows[3].page) == (FACT, fact.value, 3)
    assert rows[2].source == MODEL and rows[2].page == 2 and "assign" in rows[2].quote
    assert result.mode == "per_document"
    assert CitedPage(2, "Supply Agreement", 2) in result.citations


def test_a_document_with_no_matching_sentence_gets_no_model_call() -> None:
    sources = _sources()
    model = BatchingEcho()
    result = answer_each("List each contract's zebra quota", list(sources.values()), model)
    assert {row.source for row in result.rows} == {NONE}
    assert model.num_batches == []


def test_questions_about_every_document() -> None:
    assert asks_every_document("Which of these contracts have a non-compete clause?")
    assert asks_every_document("List each label's boxed warning")
    assert asks_every_document("Do any of the agreements allow assignment?")
    assert not asks_every_document("What does the lease say about rent?")
    assert not asks_every_document("Who are the parties?")


def test_facts_answer_only_when_every_label_word_is_asked() -> None:
    law = KnownFact("governing_law", "Governing law", "Ohio", quote="governed by Ohio law", page=4)
    empty = KnownFact("non_compete", "Non-compete", "")
    assert fact_for("Which law governs each contract?", [law, empty]) == law
    assert fact_for("Which contracts have a non-compete?", [law, empty]) is None
    assert fact_for("Which contracts have a cap on liability?", [law]) is None


def test_labels_are_unique_and_citations_checked_against_them() -> None:
    labels = labels_for(
        [(1, "Lease, Main St [A]", "a.pdf"), (2, None, "Lease Main St A"), (3, None, "b.pdf")]
    )
    assert labels == {1: "Lease Main St A (#1)", 2: "Lease Main St A (#2)", 3: "b.pdf"}
    allowed = {"Supply Agreement": (2, {1, 2}), "Office Lease": (1, {1})}
    cited, invalid = parse_source_citations(
        "Yes [supply  agreement, p. 2] and [Office Lease, pp. 1-3] but [Other, p. 1] [Office Lease, p. 9]",
        allowed,
    )
    assert cited == [CitedPage(2, "Supply Agreement", 2), CitedPage(1, "Office Lease", 1)]
    assert invalid == 2


def test_a_table_prompt_holds_the_quotes_and_their_neighbours_not_whole_passages() -> None:
    from pipelines.collection.table import around_quotes
    from pipelines.retrieval.evidence import DocumentSentences, sentence_evidence

    pages = [
        filler_page(1),
        filler_page(2) + " " + NON_COMPETE + " Page 2 closing line.",
        filler_page(3),
    ]
    document = make_document(pages)
    sentences = DocumentSentences(document.pages)
    ranked = PassageIndex(document.passages).rank("Does it have a non-compete clause?", 3)
    quotes = sentence_evidence(ranked, "non-compete compete", sentences, k=1)
    assert quotes[0].text == NON_COMPETE
    excerpt = around_quotes(sentences, quotes)
    assert excerpt.startswith("[p. 2]\n")
    # The quote, the sentence before it and the one after it; nothing else of the document.
    assert "Page 2 fact 6 concerns" in excerpt and NON_COMPETE in excerpt
    assert "Page 2 closing line." in excerpt
    assert "Page 2 fact 5" not in excerpt and "Page 1" not in excerpt and "Page 3" not in excerpt
    model = BatchingEcho()
    sources = _sources()
    answer_each("Which contracts have a non-compete clause?", list(sources.values()), model)
    assert model.num_batches == [1]  # the employment contract only


@dataclass
class AddsItsPrompt(BatchingEcho):
    """The echo model's answer with its instructions written back and a placeholder after it;
    with `only_prompt`, those alone."""

    only_prompt: bool = False

    def _answer(self, content: str) -> str:
        task = content.rsplit("\n\n", 1)[-1].split("\nQuestion:")[0]
        own = "" if self.only_prompt else super()._answer(content)
        return f"{own} {task} Paste your answer here."


def test_an_answer_across_documents_keeps_nothing_of_its_prompt() -> None:
    sources = _sources()
    question = "Can the supplier assign the agreement without consent?"
    result = answer_across(question, _ranked(question, sources), sources, AddsItsPrompt())
    assert "[Supply Agreement, p. 2]" in result.text and "assign" in result.text
    assert "Answer the question" not in result.text and "Paste" not in result.text
    assert result.stats["num_prompt_sentences_dropped"] == 3  # two instructions, a placeholder

    echo_only = AddsItsPrompt(only_prompt=True)
    result = answer_across(question, _ranked(question, sources), sources, echo_only)
    # Nothing of the document was said: the best quote stands in, and no prompt text is kept
    # as "the model's own answer" beside it.
    assert result.support == "quoted" and result.model_text is None
    assert result.text.endswith("(quoted from [Supply Agreement, p. 2])")


def test_a_table_row_keeps_nothing_of_its_prompt() -> None:
    sources = _sources()
    question = "Which of these contracts may assign, in plain words?"
    result = answer_each(question, list(sources.values()), AddsItsPrompt())
    rows = [row for row in result.rows if row.source == MODEL]
    assert rows and all("Answer the question" not in row.answer for row in rows)
    assert all("Paste" not in row.answer for row in rows)
    assert result.stats["num_prompt_sentences_dropped"] == 3 * len(rows)
