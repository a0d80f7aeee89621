"""The default model (SmolLM2-135M-Instruct on the CPU) answering from quotes: whatever it
writes, the stored answer quotes the governing-law clause with its page, is labelled, and does
not loop. Slow: one real prefill and decode of a few pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import EngineConfig, LLMEngine
from pipelines.answer.check import FALLBACK_STATUSES, quoted_answer
from pipelines.answer.question import answer_question
from pipelines.answer.support import MISSING, check_support
from pipelines.ingest.parse import parse_pdf_in_process
from pipelines.ingest.split import split_into_passages
from pipelines.inputs import DocumentInput
from pipelines.repetition import is_looping
from tests.pipelines.contract_pdf import contract_pdf
from tests.worker import celery_support
from worker.model.adapter import EngineChatModel


@pytest.mark.slow
def test_the_default_model_answers_from_the_quoted_clause(
    tmp_path: Path, converted_model_cache: Path, count_tokens
) -> None:
    parsed = parse_pdf_in_process(contract_pdf(tmp_path, num_pages=6, law_page=4))
    passages = split_into_passages(parsed.pages, count_tokens=count_tokens, max_tokens=128)
    document = DocumentInput("Supply Agreement", "legal", parsed.pages, tuple(passages))
    gguf = celery_support.default_gguf()
    config = EngineConfig(model_path=gguf, model_cache_dir=converted_model_cache, device="cpu")
    model = EngineChatModel(LLMEngine(config), "smollm2-135m-instruct")

    result = answer_question(
        document, "Which state's law governs this agreement?", model, max_new_tokens=64
    )

    best = result.quotes[0]
    assert best.page == 4 and "State of Vermont" in " ".join(best.text.split())
    assert result.support in {"supported", "partly_supported", *FALLBACK_STATUSES}
    assert result.text and not is_looping(result.text)
    if result.support in FALLBACK_STATUSES:
        assert result.text == quoted_answer(best) and result.cited_pages == [4]
    else:
        # Kept only when nothing it states is missing from the document.
        text = "\n\n".join(page.text for page in parsed.pages)
        check = check_support(result.text, [q.text for q in result.quotes], text)
        assert all(c.found_in != MISSING for c in check.checks), check
    print(f"\nsupport={result.support} answer={result.text!r}")
