"""What an ingest stores and says about a parsed document: its rows, its job stats, its notice.

No text goes into the stats or the notice: counts, page numbers and sentences only.
"""

from __future__ import annotations

from pathlib import Path

from app.db.models import DocumentKind, PageSource
from app.services import documents
from app.services.provenance import invisible_text_warning, ocr_notice, redaction_warning
from pipelines.documents import ParsedDocument, Passage
from worker.ingest.notices import failed_pages_notice
from worker.ingest.passage_rows import new_passage


def source_stats(parsed: ParsedDocument) -> dict:
    """The ingest job's counts of OCR'd pages, bad redactions and invisible text (no text)."""
    confidences = [p.ocr_confidence for p in parsed.pages if p.ocr_confidence is not None]
    return {
        "num_ocr_pages": len(parsed.ocr_pages),
        "ocr_pages": list(parsed.ocr_pages),
        "ocr_mean_confidence": (
            round(sum(confidences) / len(confidences), 4) if confidences else None
        ),
        "num_redactions": len(parsed.redactions),
        "redaction_pages": sorted({box.page for box in parsed.redactions}),
        "num_hidden_chars": sum(box.num_chars for box in parsed.redactions),
        "is_hidden_text_kept": bool(parsed.redactions or parsed.invisible_text)
        and not parsed.is_hidden_text_removed,
        # Text a reader cannot see, left out like redactions: [page, characters] pairs.
        "num_invisible_chars": sum(item.num_chars for item in parsed.invisible_text),
        "invisible_text": [[item.page, item.num_chars] for item in parsed.invisible_text],
    }


def stored_notice(parsed: ParsedDocument, failed_pages: tuple[int, ...]) -> str | None:
    """What the user should know about a stored document: lost pages, OCR, hidden text."""
    stats = source_stats(parsed)
    sentences = [
        failed_pages_notice(failed_pages),
        redaction_warning(
            pages=[box.page for box in parsed.redactions],
            is_hidden_text_kept=stats["is_hidden_text_kept"],
        ),
        invisible_text_warning(
            counts={item.page: item.num_chars for item in parsed.invisible_text},
            is_hidden_text_kept=stats["is_hidden_text_kept"],
        ),
        ocr_notice(ocr_pages=parsed.ocr_pages, mean_confidence=stats["ocr_mean_confidence"]),
    ]
    joined = " ".join(sentence for sentence in sentences if sentence)
    return joined or None


def new_document(
    file_name: str,
    content_hash: str,
    kind: str,
    num_tokens: int,
    parsed: ParsedDocument,
    passages: list[tuple[Passage, bytes | None]],
    stored_path: Path,
    embedding_model: str | None,
) -> documents.NewDocument:
    return documents.NewDocument(
        content_hash=content_hash,
        file_name=file_name,
        title=parsed.title,
        kind=DocumentKind(kind),
        num_tokens=num_tokens,
        pages=[
            documents.NewPage(
                number=p.number,
                text=p.text,
                source=PageSource(p.source),
                ocr_confidence=p.ocr_confidence,
            )
            for p in parsed.pages
        ],
        redactions=[
            documents.NewRedaction(
                page=box.page,
                left=box.left,
                bottom=box.bottom,
                right=box.right,
                top=box.top,
                num_chars=box.num_chars,
            )
            for box in parsed.redactions
        ],
        is_hidden_text_kept=not parsed.is_hidden_text_removed,
        passages=[
            new_passage(p, embedding=vector, embedding_model=embedding_model)
            for p, vector in passages
        ],
        stored_path=str(stored_path),
    )
