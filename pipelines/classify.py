"""Guess a document's kind (legal, medical, other) from its words, for uploads whose kind is "auto".

A vote of weighted cue words per page: cheap, deterministic, and right for contracts, opinions, labels and papers.
The user can always name the kind instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pipelines.documents import PageText

_LEGAL_CUES = {
    "agreement": 1.0,
    "hereinafter": 3.0,
    "hereto": 2.0,
    "hereunder": 3.0,
    "whereas": 2.0,
    "governing law": 3.0,
    "indemnify": 3.0,
    "indemnification": 3.0,
    "termination": 1.0,
    "plaintiff": 3.0,
    "defendant": 3.0,
    "appellant": 3.0,
    "appellee": 3.0,
    "court": 1.5,
    "judgment": 2.0,
    "statute": 2.0,
    "jurisdiction": 2.0,
    "licensee": 2.5,
    "licensor": 2.5,
    "party": 0.5,
    "parties": 1.0,
    "shall": 0.5,
    "u.s.c.": 3.0,
    "counsel": 1.5,
    "affirmed": 2.0,
}
_MEDICAL_CUES = {
    "patient": 1.5,
    "patients": 1.5,
    "dosage": 3.0,
    "dose": 1.5,
    "mg": 1.0,
    "clinical": 1.5,
    "adverse reactions": 3.0,
    "contraindications": 3.0,
    "contraindicated": 3.0,
    "indications": 2.0,
    "pharmacokinetics": 3.0,
    "treatment": 1.0,
    "therapy": 1.5,
    "diagnosis": 2.0,
    "randomized": 2.0,
    "placebo": 3.0,
    "hospital": 1.5,
    "disease": 1.5,
    "symptoms": 2.0,
    "prescribing": 3.0,
    "overdosage": 3.0,
    "renal": 2.0,
    "hepatic": 2.0,
    "trial": 1.0,
    "guideline": 1.0,
}
_WORD = re.compile(r"[a-z][a-z.\-]*[a-z.]|[a-z]")
# Below this weighted score per 1,000 words neither kind is clear enough to claim.
_MIN_SCORE_PER_1000_WORDS = 4.0


def _score(text: str, cues: dict[str, float]) -> float:
    total = 0.0
    for cue, weight in cues.items():
        if " " in cue:
            total += weight * text.count(cue)
        else:
            total += weight * len(re.findall(rf"(?<![a-z]){re.escape(cue)}(?![a-z])", text))
    return total


def guess_kind(pages: Iterable[PageText]) -> str:
    """Return "legal", "medical" or "other"."""
    text = "\n".join(page.text for page in pages).lower()
    num_words = max(1, len(_WORD.findall(text)))
    legal = _score(text, _LEGAL_CUES) * 1000 / num_words
    medical = _score(text, _MEDICAL_CUES) * 1000 / num_words
    best, score = max((("legal", legal), ("medical", medical)), key=lambda item: item[1])
    if score < _MIN_SCORE_PER_1000_WORDS:
        return "other"
    return best
