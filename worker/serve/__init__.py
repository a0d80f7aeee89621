"""`longdoc serve`: our engine behind the OpenAI-compatible HTTP API (worker/serve/app.py)."""
