"""Answers to a question about one document: from a stored key fact when one answers it, else
from quotes the model phrases, checked against those quotes (question.py is the entry point)."""
