"""Ingest: a PDF becomes page texts (parse, in a capped child process; OCR for scanned pages;
hidden and redacted text left out), then passages and sentences with page provenance (split),
and a guess at what kind of document it is (classify)."""
