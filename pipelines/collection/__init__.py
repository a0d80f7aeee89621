"""Questions across a collection of documents: one answer citing documents and pages, or a
table with one row per document."""
