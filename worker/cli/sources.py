"""What `longdoc show` says about where a document's text came from: OCR'd pages, bad
redactions and text a reader cannot see (app/services/provenance.py words the sentences). Never
the hidden text itself."""

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from sqlalchemy.orm import Session

from app.db.models import Document, Page
from app.services import documents
from app.services.provenance import (
    invisible_text_warning,
    page_list,
    redaction_warning,
    source_label,
)


def source_fields(*, session: Session, document: Document) -> list[tuple[str, str]]:
    """Header rows: the pages OCR read (with their mean confidence) and the redaction warning."""
    fields = []
    ocr_pages = documents.ocr_pages_of(session=session, document_id=document.id)
    if ocr_pages:
        confidences = [c for c in ocr_pages.values() if c is not None]
        mean = f", mean confidence {sum(confidences) / len(confidences):.0%}" if confidences else ""
        fields.append(("OCR pages", f"{len(ocr_pages)} (page {page_list(list(ocr_pages))}{mean})"))
    if document.num_redactions:
        boxes = documents.get_redactions(session=session, document_id=document.id)
        warning = redaction_warning(
            pages=[box.page for box in boxes], is_hidden_text_kept=document.is_hidden_text_kept
        )
        fields.append(("Hidden text", warning or ""))
    counts, kept = documents.invisible_text_of(session=session, document_id=document.id)
    warning = invisible_text_warning(counts=counts, is_hidden_text_kept=kept)
    if warning:
        fields.append(("Invisible text", warning))
    return fields


def page_title(page: Page) -> str:
    """ "Page 3", or "Page 3 · OCR, 97% confidence" for a page OCR read."""
    if page.source != "ocr":
        return f"Page {page.number}"
    label = source_label(source=page.source, ocr_confidence=page.ocr_confidence)
    return f"Page {page.number} · {label}"


def print_redactions(console: Console, *, session: Session, document: Document) -> int:
    """The boxes that hide readable text: page, corners and characters hidden; their number.
    Then the characters a reader cannot see, by page."""
    boxes = documents.get_redactions(session=session, document_id=document.id)
    _print_invisible_text(console, session=session, document=document)
    if not boxes:
        console.print(f"Document {document.id} has no boxes that hide readable text.")
        return 0
    table = Table(title="Boxes that hide readable text (PDF points, origin bottom left)")
    for column in ("page", "left", "bottom", "right", "top", "characters hidden"):
        table.add_column(column, justify="right")
    for box in boxes:
        table.add_row(
            str(box.page),
            *(f"{value:.1f}" for value in (box.left, box.bottom, box.right, box.top)),
            str(box.num_chars),
        )
    console.print(table)
    kept = "kept in the stored pages" if document.is_hidden_text_kept else "left out of them"
    console.print(
        escape(
            f"Document {document.id}: {len(boxes)} box(es) hide {sum(b.num_chars for b in boxes)} "
            f"character(s), {kept}."
        )
    )
    return len(boxes)


def _print_invisible_text(console: Console, *, session: Session, document: Document) -> None:
    counts, kept = documents.invisible_text_of(session=session, document_id=document.id)
    if not counts:
        return
    table = Table(title="Text a reader cannot see (invisible, tiny, off the page, hidden layer)")
    for column in ("page", "characters"):
        table.add_column(column, justify="right")
    for page, count in sorted(counts.items()):
        table.add_row(str(page), str(count))
    console.print(table)
    where = "kept in the stored pages" if kept else "left out of them"
    console.print(
        escape(f"Document {document.id}: {sum(counts.values())} invisible character(s), {where}.")
    )
