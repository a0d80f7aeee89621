"""Summaries: key passages (no model), the lead built from key facts, and the model's summary
(one pass or by sections, then combined) whose sentences are kept only where the document
supports them (summarize.py is the entry point)."""
