"""The loop detector on real looping outputs of the default model (issue 11) and on lists,
tables and prose that repeat themselves legitimately."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.detokenizer import IncrementalDetokenizer
from engine.loop_detector import KIND_PHRASE, KIND_SPAN, Loop, LoopDetector
from engine.sampling_params import SamplingParams

# Outputs of SmolLM2-135M-Instruct, greedy, quoted in issue 11.
JAGELS = (
    "James M. Dowd, Judge, and Kurt S. Odenwald, J. The document is Jagels, The court is Jagels,"
    + " The court is Jagels," * 23
)
HABEAS = (
    "This court opinion in a few short paragraphs. It covers the issue of a writ of habeas "
    "corpus and the issue of a writ of habeas corpus."
    + " It also covers the issue of a writ of habeas corpus and the issue of a writ of habeas"
    " corpus." * 3
)
PARTIES = "The parties to this agreement are" + " the parties to this agreement are" * 12

TABLE = """| Field | Value |
|---|---|
| Parties | Acme Corp. and Beta LLC |
| Effective date | Not specified in the agreement |
| Expiration date | Not specified in the agreement |
| Renewal term | Not specified in the agreement |
| Notice period | Not specified in the agreement |
| Governing law | Not specified |
| Assignment | Not specified |
| Exclusivity | Not specified |
| Non-compete | Not specified |
| Cap on liability | Not specified |
|---|---|
|---|---|
"""
LIST = """Key facts:
- Termination for convenience: None
- Assignment: None
- Exclusivity: None
- Non-compete: None
1. The Licensee shall pay the fee within 30 days of the invoice.
2. The Licensee shall pay the fee within 60 days of delivery.
3. The Licensee shall pay the fee within 90 days of acceptance.
4. The Licensee shall pay the fee within 120 days of notice.
- [ ] Yes
- [ ] Yes
- [ ] Yes
"""
PROSE = (
    "The Court of Appeals of Missouri, Eastern District, affirmed the judgment of the circuit "
    "court. The appellant argued that the trial court erred in denying his motion; the court "
    "held that the motion was untimely under Rule 24.035 and that the appellant had waived the "
    "claim. The judgment of the circuit court is affirmed. Dowd, J., and Odenwald, J., concur."
)


def _word_tokens(text: str) -> tuple[list[int], list[str]]:
    """Tokens the size of a BPE tokenizer's (GPT-2's pre-tokenizer pattern), each distinct
    piece one id: fast, and as coarse as the default model's tokens for such text."""
    pieces = re.findall(r" ?\w+| ?[^\w\s]+|\s+", text)
    vocab: dict[str, int] = {}
    return [vocab.setdefault(piece, len(vocab)) for piece in pieces], pieces


def _run(text: str, detector: LoopDetector | None = None) -> tuple[Loop | None, list[str]]:
    detector = detector or LoopDetector()
    ids, pieces = _word_tokens(text)
    for token_id, piece in zip(ids, pieces, strict=True):
        if detector.append(token_id, piece) is not None:
            break
    return detector.loop, pieces


def test_a_repeated_sentence_is_cut_after_its_first_copy():
    loop, pieces = _run(JAGELS)
    assert loop is not None and loop.kind == KIND_SPAN and loop.period == 5
    kept = "".join(pieces[: loop.cut_at])
    assert kept.endswith("The document is Jagels, The court is Jagels,")
    assert kept.count("The court is Jagels") == 1
    assert loop.start <= loop.cut_at < loop.start + loop.period
    # Found within a few copies, not at the end of the token budget.
    assert loop.start + loop.period * loop.num_copies <= 40


def test_a_phrase_said_a_third_time_in_a_paragraph_is_cut_at_a_sentence_end():
    loop, pieces = _run(HABEAS)
    assert loop is not None and loop.kind == KIND_PHRASE and loop.num_copies == 3
    assert "".join(pieces[: loop.cut_at]) == (
        "This court opinion in a few short paragraphs. It covers the issue of a writ of "
        "habeas corpus and the issue of a writ of habeas corpus."
    )


def test_a_looping_answer_keeps_one_copy():
    loop, pieces = _run(PARTIES)
    assert loop is not None and loop.kind == KIND_SPAN and loop.period == 6
    assert "".join(pieces[: loop.cut_at]).lower().count("parties to this agreement") == 1


def test_runs_of_one_token_are_loops_once_long_enough():
    loop, _ = _run("Answer:" + " =" * 31)
    assert loop is None
    loop, pieces = _run("Answer:" + " =" * 40)
    assert loop is not None and loop.period == 1
    assert "".join(pieces[: loop.cut_at]) == "Answer: ="


@pytest.mark.parametrize("text", [TABLE, LIST, PROSE, PROSE + "\n\n" + PROSE])
def test_tables_lists_and_prose_are_not_loops(text):
    loop, _ = _run(text)
    assert loop is None


def test_the_phrase_rule_counts_per_line_and_can_be_off():
    repeated_lines = "\n".join(["The fee is payable within thirty days."] * 3)
    assert _run(repeated_lines)[0] is None  # three lines, once each; the span is too short
    third_time = HABEAS[: HABEAS.index(" and", HABEAS.index("It also"))] + "."
    assert _run(third_time)[0] is not None
    assert _run(third_time, LoopDetector(max_phrase_repeats=0))[0] is None
    off = LoopDetector.from_params(SamplingParams(max_phrase_repeats=0))
    assert _run(third_time, off)[0] is None
    # Without the phrase rule the whole loop is still caught, later, by the span rule.
    assert _run(HABEAS, LoopDetector(max_phrase_repeats=0))[0].kind == KIND_SPAN


def test_a_found_loop_stays_found():
    detector = LoopDetector()
    loop, _ = _run(JAGELS, detector)
    assert loop is not None
    assert detector.append(12345, " new") is loop
    assert loop.to_dict()["kind"] == KIND_SPAN


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="min_copies"):
        LoopDetector(min_copies=1)


# ---- with the default model's tokens ------------------------------------------------------

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"


def _run_tokens(tokenizer, token_ids: list[int], detector: LoopDetector) -> Loop | None:
    detokenizer = IncrementalDetokenizer(tokenizer)
    for token_id in token_ids:
        if detector.append(token_id, detokenizer.append(token_id)) is not None:
            break
    return detector.loop


@pytest.mark.slow  # reading the tokenizer out of the GGUF file takes ~15 s
def test_default_tokenizer_loops_and_non_loops(default_tokenizer):
    tokenizer = default_tokenizer
    for text, kind in ((JAGELS, KIND_SPAN), (HABEAS, KIND_PHRASE), (PARTIES, KIND_SPAN)):
        ids = tokenizer.encode(text, add_special_tokens=False)
        loop = _run_tokens(tokenizer, ids, LoopDetector())
        assert loop is not None and loop.kind == kind, text
        kept = tokenizer.decode(ids[: loop.cut_at])
        assert text.startswith(kept) and len(kept) < len(text) / 2
    for text in (TABLE, LIST, PROSE, "Summary:" + "\n" * 20 + "-" * 200 + "\n" + "=" * 120):
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert _run_tokens(tokenizer, ids, LoopDetector()) is None, text


@pytest.mark.slow
@pytest.mark.corpus
def test_span_rule_on_real_documents(default_tokenizer):
    """The evidence for the defaults: over the corpus's legal and medical documents (about
    300K tokens of text, with tables, lists and running headers), the span rule fires only on
    rows of redaction markers ("[***]") that repeat word for word."""
    from pypdf import PdfReader

    files = sorted((CORPUS / "legal").glob("*.pdf")) + sorted((CORPUS / "medical").glob("*.pdf"))
    if not files:
        pytest.skip(f"no test corpus at {CORPUS.resolve()}")
    num_tokens, trips = 0, []
    for path in files:
        text = "\n".join(page.extract_text() or "" for page in PdfReader(path).pages)
        ids = default_tokenizer.encode(text, add_special_tokens=False)
        num_tokens += len(ids)
        detector = LoopDetector(max_phrase_repeats=0)
        for i, token_id in enumerate(ids):
            loop = detector.append(token_id)
            if loop is not None:
                trips.append(default_tokenizer.decode(ids[loop.start - loop.period : i + 1]))
                detector = LoopDetector(max_phrase_repeats=0)
    assert num_tokens > 250_000
    assert len(trips) <= 3
    assert all("***" in trip for trip in trips), trips
