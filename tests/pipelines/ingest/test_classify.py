from pipelines.documents import PageText
from pipelines.ingest.classify import guess_kind

CONTRACT = (
    "This License Agreement (the Agreement) is entered into by the parties hereto. WHEREAS the Licensor "
    "owns the software, the Licensee shall pay the fees hereunder. This Agreement is governed by the "
    "governing law of the State of Delaware. Each party shall indemnify the other party."
)
LABEL = (
    "INDICATIONS AND USAGE: treatment of infections in adult patients. DOSAGE AND ADMINISTRATION: 500 mg "
    "every 8 hours. CONTRAINDICATIONS: hypersensitivity. ADVERSE REACTIONS: the most common adverse "
    "reactions in clinical trials were diarrhea and rash. Renal impairment requires a lower dose."
)
RECIPE = (
    "Preheat the oven. Mix flour, sugar and butter in a bowl, then add two eggs and stir until smooth. "
    "Bake for forty minutes and let the cake cool before serving it with fresh berries."
)


def test_contract_is_legal() -> None:
    assert guess_kind([PageText(1, CONTRACT)]) == "legal"


def test_drug_label_is_medical() -> None:
    assert guess_kind([PageText(1, LABEL), PageText(2, "")]) == "medical"


def test_everyday_text_is_other() -> None:
    assert guess_kind([PageText(1, RECIPE)]) == "other"


def test_empty_document_is_other() -> None:
    assert guess_kind([]) == "other"
