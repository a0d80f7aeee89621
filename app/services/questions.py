"""What a person types to ask or to search, checked once for every way in (the UI, the CLI)
before a job is created or a search runs.

The text is read as it looks (app.display.typed_text: NFKC, invisible and control characters
removed, spaces collapsed), so a question of zero-width spaces is empty, and then held to a
length: a 1 MB question held a worker thread for minutes, a 100,000-character search embedded
every word of it. The limits are settings (max_question_chars, max_search_chars) whose
defaults the UI's text boxes use too; a service called without one uses those defaults.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.db.models import Job, JobKind
from app.display import typed_text
from app.errors import AppError
from app.services import jobs
from app.settings import MAX_QUESTION_CHARS, MAX_SEARCH_CHARS


class InvalidQuestion(AppError):
    """A question or a search that is empty once read as it looks, or longer than the limit."""

    code = "invalid_question"


def typed_question(question: str, *, max_chars: int = MAX_QUESTION_CHARS) -> str:
    """The question as it reads (typed_text); InvalidQuestion when nothing visible is left or it
    is longer than `max_chars`."""
    text = _typed(question, max_chars, "question")
    if not text:
        raise InvalidQuestion(
            "The question is empty: it holds no visible characters. Type the question in words."
        )
    if len(text) > max_chars:
        raise InvalidQuestion(_too_long("question", len(text), max_chars))
    return text


def typed_search(query: str, *, max_chars: int | None = MAX_SEARCH_CHARS) -> str:
    """The search words as they read (typed_text; "" when none); InvalidQuestion when longer
    than `max_chars` (None: any length)."""
    if max_chars is None:
        return typed_text(query)
    text = _typed(query, max_chars, "search")
    if len(text) > max_chars:
        raise InvalidQuestion(_too_long("search", len(text), max_chars))
    return text


def _typed(text: str, max_chars: int, what: str) -> str:
    # Invisible characters may pad a text a little, never tenfold: a megabyte is refused before
    # it is read character by character.
    if len(text) > 10 * max_chars:
        raise InvalidQuestion(_too_long(what, len(text), max_chars))
    return typed_text(text)


def _too_long(what: str, length: int, max_chars: int) -> str:
    if what == "question":
        return (
            f"The question is too long: {length:,} characters, and a question may have at "
            f"most {max_chars:,}. Ask it in fewer words, or ask several shorter questions."
        )
    return (
        f"The search is too long: {length:,} characters, and a search may have at most "
        f"{max_chars:,}. Search for the few words that matter most."
    )


def create_answer_job(
    *, session: Session, document_id: int, question: str, max_chars: int = MAX_QUESTION_CHARS
) -> Job:
    """A queued answer job about one document, its question checked (typed_question) first."""
    clean = typed_question(question, max_chars=max_chars)
    return jobs.create_job(
        session=session, kind=JobKind.ANSWER, document_id=document_id, params={"question": clean}
    )
