"""Database tables. Migrations in migrations/ create them; the application never calls create_all.

No model's repr shows text: rows hold legal and medical documents.

One module per area; every name is re-exported here, and importing this package imports every
table module, so `Base.metadata` (alembic's migrations/env.py, tests) holds every table:
- base.py: `Base`, its naming convention and the shared column types (`UTCDateTime`, `JsonType`)
- documents.py: documents, pages, redactions, passages
- jobs.py: background jobs
- results.py: summaries, answers, key facts
- collections.py: collections, their documents, answers across a collection
- accounts.py: users, collection grants, the audit log, API keys
"""

from app.db.models.accounts import ApiKey, AuditEvent, CollectionGrant, Role, User
from app.db.models.base import NAMING_CONVENTION, Base, JsonType, UTCDateTime, utc_now
from app.db.models.collections import Collection, CollectionAnswer, CollectionDocument
from app.db.models.documents import (
    Document,
    DocumentKind,
    DocumentStatus,
    Page,
    PageSource,
    Passage,
    Redaction,
)
from app.db.models.jobs import Job, JobKind, JobStatus
from app.db.models.results import Answer, Fact, FactSource, Summary, SummaryMethod, SupportStatus

__all__ = [
    "NAMING_CONVENTION",
    "Answer",
    "ApiKey",
    "AuditEvent",
    "Base",
    "Collection",
    "CollectionAnswer",
    "CollectionDocument",
    "CollectionGrant",
    "Document",
    "DocumentKind",
    "DocumentStatus",
    "Fact",
    "FactSource",
    "Job",
    "JobKind",
    "JobStatus",
    "JsonType",
    "Page",
    "PageSource",
    "Passage",
    "Redaction",
    "Role",
    "Summary",
    "SummaryMethod",
    "SupportStatus",
    "UTCDateTime",
    "User",
    "utc_now",
]
