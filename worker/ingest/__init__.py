"""Storing documents: a PDF on disk becomes rows (pages, passages, notices), the inbox folder
becomes queued ingest jobs, and copies no document owns are removed."""
