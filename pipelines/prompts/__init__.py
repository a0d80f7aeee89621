"""Prompts: the templates every model call is built from (templates.py: the document block,
summaries and plain questions; quoted_question.py; collection.py), and the guard that keeps
their words out of what is stored (texts.py renders them without a document, echo.py checks a
sentence against them). Key-fact prompts live with the key facts (pipelines/facts/prompts.py)."""
