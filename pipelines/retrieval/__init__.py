"""Retrieval: ranking passages for a query (BM25, embeddings, both fused) and picking the
sentences that bear on it as verbatim quotes (evidence) with their pages and offsets."""
