"""Generated documents with known key facts on known pages, and a scripted stand-in model.

The contract and the opinion are invented (no real party, court or case); each fact sits on a
page the tests name. `ScriptedModel` answers each field's question with what a test gives it,
as a small model might (right, wrong or invented), so the tests check what validation and the
rules make of it; tests/worker/jobs/test_runner_facts.py runs the real model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipelines.documents import PageText
from pipelines.ingest.parse import parse_pdf_in_process
from pipelines.ingest.split import split_into_passages
from pipelines.inputs import DocumentInput
from tests.pipelines import pdf_factory
from tests.pipelines.echo_model import EchoCompletion, count_words

CONTRACT_PAGES = [
    "MASTER SUPPLY AGREEMENT\n"
    "\n"
    'This Master Supply Agreement (the "Agreement") is made and entered into as of the\n'
    "14th day of March, 2021, by and between Quillfeather Instruments, Inc., a Delaware\n"
    'corporation ("Quillfeather"), and Marrowby Analytics LLC, a Vermont limited liability\n'
    'company ("Marrowby").\n'
    "\n"
    "WHEREAS, Quillfeather makes precision instruments and Marrowby wishes to buy them.\n"
    "\n"
    "1. Supply. Quillfeather shall supply the instruments listed in Schedule A.",
    "2. Prices. Marrowby shall pay the prices in Schedule B within thirty days of invoice.\n"
    "\n"
    "3. Term. The term of this Agreement shall commence on the Effective Date and shall\n"
    "expire on March 31, 2026, unless terminated earlier as provided herein.\n"
    "\n"
    "4. Renewal. Thereafter this Agreement shall renew automatically for successive one (1)\n"
    "year periods unless either party gives written notice of non-renewal at least\n"
    "ninety (90) days before the end of the then-current term.",
    "5. Assignment. Neither party may assign this Agreement without the prior written\n"
    "consent of the other party.\n"
    "\n"
    "6. Governing Law. This Agreement shall be governed by and construed in accordance\n"
    "with the laws of the State of Oregon, without regard to its conflict of laws rules.\n"
    "\n"
    "7. Notices. Notices shall be sent to the addresses set out in Schedule C.",
]
CONTRACT_FACTS = {
    "document_name": ("MASTER SUPPLY AGREEMENT", 1),
    "parties": ("Quillfeather Instruments, Inc.; Marrowby Analytics LLC", 1),
    "agreement_date": ("2021-03-14", 1),
    "expiration_date": ("2026-03-31", 2),
    "renewal_term": ("P1Y", 2),
    "notice_period": ("P90D", 2),
    "governing_law": ("Oregon", 3),
    "anti_assignment": ("yes", 3),
}

OPINION_PAGES = [
    "IN THE COURT OF APPEALS OF THE STATE OF EXAMPLE\n"
    "\n"
    "No. 19-4417\n"
    "\n"
    "HALVERSEN TIMBER COMPANY,\n"
    "\n"
    "Plaintiff, Appellant,\n"
    "v.\n"
    "\n"
    "COUNTY OF BRISTLECONE,\n"
    "\n"
    "Defendant, Appellee.\n"
    "\n"
    "Decided October 5, 2020",
    "OPINION\n"
    "\n"
    "The plaintiff challenges a county ordinance that limits logging near rivers. The trial\n"
    "court entered judgment for the county after a bench trial on the stipulated facts.\n"
    "\n"
    "We review the trial court's conclusions of law de novo and its findings for clear error.",
    "The ordinance is a valid exercise of the county's police power, and the plaintiff\n"
    "has not shown that it takes property without compensation.\n"
    "\n"
    "For these reasons, we affirm the judgment of the trial court.",
]
OPINION_FACTS = {
    "court": ("COURT OF APPEALS OF THE STATE OF EXAMPLE", 1),
    "case_parties": ("HALVERSEN TIMBER COMPANY v. COUNTY OF BRISTLECONE", 1),
    "docket_number": ("No. 19-4417", 1),
    "decision_date": ("2020-10-05", 1),
    "disposition": ("affirmed", 3),
}


def pdf_document(
    tmp_path: Path,
    pages: list[str],
    *,
    kind: str = "legal",
    name: str = "doc.pdf",
    header: str | None = None,
) -> DocumentInput:
    """`pages` written to a PDF with fpdf2 (`header` printed atop each page), parsed back as
    ingest does, split into passages."""
    path = pdf_factory.text_pdf(tmp_path, pages, name=name, header=header)
    parsed = parse_pdf_in_process(path)
    passages = split_into_passages(parsed.pages, count_tokens=count_words, max_tokens=60)
    return DocumentInput(parsed.title, kind, parsed.pages, tuple(passages))


def text_document(pages: list[str], *, kind: str = "legal") -> DocumentInput:
    """The same, from page texts directly (no PDF)."""
    page_texts = tuple(PageText(n, text) for n, text in enumerate(pages, start=1))
    passages = split_into_passages(page_texts, count_tokens=count_words, max_tokens=60)
    return DocumentInput(None, kind, page_texts, tuple(passages))


@dataclass
class ScriptedModel:
    """A ChatModel whose answer to a question is `answers[question]` ("Not stated." when the
    test gives none); it records every prompt it gets."""

    answers: dict[str, str] = field(default_factory=dict)
    name: str = "scripted-test"
    max_context_tokens: int = 4096
    prompts: list[list[dict[str, str]]] = field(default_factory=list)
    schemas: list[dict | None] = field(default_factory=list)  # the response schema of each

    def count_tokens(self, texts, /):
        return count_words(texts)

    def count_chat_tokens(self, messages, /):
        return sum(len(m["content"].split()) for m in messages)

    def complete(
        self, messages, *, max_new_tokens, on_progress=None, on_tokens=None, response_schema=None
    ):
        self.prompts.append([dict(m) for m in messages])
        self.schemas.append(response_schema)
        question = messages[-1]["content"].rsplit("Question: ", 1)[-1].strip()
        text = self.answers.get(question, "Not stated.")
        return EchoCompletion(text, {"num_prompt_tokens": 1, "finish_reason": "stop"})
