"""Key facts: per document kind, a schema of fields (fields_legal, fields_medical), each value
read by the model from retrieved quotes and validated by rules, or read by the rules alone
(extract.py is the entry point)."""
