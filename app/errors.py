"""The app layer's errors. Each carries a sentence a person understands and a stable `code`.

The edges (CLI, worker tasks, UI) show `str(error)` and may store `error.code` in a job's
`error_code`; no edge should need to show a traceback for these.
"""


class AppError(Exception):
    code = "app_error"

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence


class DatabaseUnavailable(AppError):
    """The database cannot be reached or opened."""

    code = "database_unavailable"

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"Cannot open the database at {where}: {reason}")
        self.where = where


class DatabaseBusy(AppError):
    """Another program held the database's write lock through every retry (app/db/retry.py)."""

    code = "database_busy"

    def __init__(self, what: str) -> None:
        super().__init__(
            f"The database stayed busy while {what}: another program kept it locked for "
            "writing, so LongDoc stopped this step. Try again in a minute; if it keeps "
            "happening, close the other program that has the database open."
        )
        self.what = what


class DatabaseNotMigrated(AppError):
    """The schema is missing or not at the newest migration."""

    code = "database_not_migrated"


class InvalidSettings(AppError):
    """A LONGDOC_* setting has a value that cannot be used."""

    code = "invalid_settings"


class NotFound(AppError):
    """A document, page or job the user asked for does not exist."""

    code = "not_found"


class DuplicateDocument(AppError):
    """A document with the same content hash is already stored."""

    code = "duplicate_document"

    def __init__(self, content_hash: str, document_id: int) -> None:
        super().__init__(
            f"This file is already stored as document {document_id} "
            f"(content hash {content_hash[:12]}…)."
        )
        self.content_hash = content_hash
        self.document_id = document_id


class StoredFileError(AppError):
    """An uploaded file could not be stored, or its content does not match its hash."""

    code = "stored_file_error"


class UnknownExportFormat(AppError):
    """An export was asked for in a file format LongDoc does not write."""

    code = "unknown_export_format"


class InvalidCollection(AppError):
    """A collection name that cannot be used: empty, too long, or taken by another one."""

    code = "invalid_collection"


class AmbiguousCollection(AppError):
    """A name that picks several collections the user may read (names are unique per owner);
    the sentence names them and says how to pick one ("#ID")."""

    code = "ambiguous_collection"
