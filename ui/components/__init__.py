"""Pieces the pages share: job progress, page text with highlights, charts, the upload check."""
