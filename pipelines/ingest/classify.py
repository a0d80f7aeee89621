"""Guess a document's kind (legal, medical, other) from its words, for uploads whose kind is "auto".

A vote of weighted cue words per page: cheap, deterministic, and right for contracts, opinions, labels and papers.
The user can always name the kind instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pipelines.documents import PageText
from pipelines.kinds import (
    CONTRACT,
    GUIDELINE,
    LABEL,
    LEGAL,
    MEDICAL,
    OPINION,
    OTHER,
    PAPER,
    SUBKINDS,
)

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
    best, score = max(((LEGAL, legal), (MEDICAL, medical)), key=lambda item: item[1])
    if score < _MIN_SCORE_PER_1000_WORDS:
        return OTHER
    return best


# Sub-kinds: which key-fact schema a document gets. Cues are phrases that mark the genre's
# structure (a contract's recitals, an opinion's caption and disposition, a label's sections, a
# guideline's recommendations, a paper's abstract and methods), not any subject matter.
_SUBKIND_CUES: dict[str, dict[str, float]] = {
    CONTRACT: {
        "agreement": 1.0,
        "hereto": 2.0,
        "hereunder": 2.0,
        "hereinafter": 2.0,
        "whereas": 2.0,
        "witnesseth": 3.0,
        "in witness whereof": 3.0,
        "licensee": 1.0,
        "licensor": 1.0,
        "shall": 0.3,
        "party": 0.5,
        "parties": 0.5,
    },
    OPINION: {
        "plaintiff": 1.5,
        "plaintiffs": 1.5,
        "defendant": 1.5,
        "defendants": 1.5,
        "appellant": 2.0,
        "appellee": 2.0,
        "petitioner": 2.0,
        "respondent": 2.0,
        "affirmed": 2.0,
        "reversed": 2.0,
        "remanded": 2.0,
        "we hold": 3.0,
        "the court": 0.5,
        "judge": 1.0,
        "justice": 1.0,
        "certiorari": 3.0,
        "opinion of the court": 3.0,
        "trial court": 2.0,
        "v.": 0.5,
    },
    LABEL: {
        "indications and usage": 4.0,
        "dosage and administration": 4.0,
        "contraindications": 2.0,
        "warnings and precautions": 4.0,
        "adverse reactions": 2.0,
        "drug facts": 4.0,
        "active ingredient": 3.0,
        "how supplied": 3.0,
        "overdosage": 3.0,
        "prescribing information": 3.0,
        "directions": 1.0,
        "tablets": 0.5,
    },
    GUIDELINE: {
        "guideline": 2.0,
        "recommendation": 2.0,
        "recommendations": 2.0,
        "should be offered": 3.0,
        "offer": 0.5,
        "consider": 0.5,
        "committee": 1.0,
        "evidence review": 3.0,
        "guidance": 1.5,
    },
    PAPER: {
        "abstract": 2.0,
        "methods": 2.0,
        "results": 1.0,
        "conclusions": 1.5,
        "participants": 1.5,
        "randomized": 1.0,
        "randomised": 1.0,
        "confidence interval": 2.0,
        "et al": 2.0,
        "references": 1.5,
        "doi": 1.0,
        "p <": 1.0,
        "study": 0.5,
    },
}


def guess_subkind(kind: str, pages: Iterable[PageText]) -> str:
    """The genre inside a kind, for the key-fact schema: "contract" or "opinion" for "legal",
    "label", "guideline" or "paper" for "medical", else "other". The sub-kind whose cues weigh
    most wins; a tie (no cues at all) takes the first, the more common upload."""
    choices = SUBKINDS.get(kind)
    if not choices:
        return OTHER
    text = "\n".join(page.text for page in pages).lower()
    scores = [(_score(text, _SUBKIND_CUES[choice]), -i, choice) for i, choice in enumerate(choices)]
    return max(scores)[2]
