from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Document, Job, JobStatus
from app.services import documents
from pipelines.ingest.limits import ParseLimits
from tests.pipelines import pdf_factory
from worker.ingest.store import (
    PRESENT,
    REFUSED,
    STORED,
    IngestOptions,
    ReadPdf,
    UnreadableFile,
    pdf_paths,
    read_pdf,
    store_read,
)
from worker.jobs.ingest import ingest_file

CONTRACT_PAGES = [
    "SERVICES AGREEMENT\n\nThis Agreement is made between Acme Inc. and Beta Corp.\n"
    "The parties agree as follows.\n\n1. Term. This Agreement begins on 1 January 2024.",
    "2. Payment. Beta Corp. shall pay Acme Inc. USD 10,000 per month.\n\n"
    "3. Governing law. This Agreement is governed by the laws of the State of New York.",
    "",
    "4. Termination. Either party may terminate this Agreement on 30 days notice.",
]


@pytest.fixture
def sessions(session: Session) -> sessionmaker[Session]:
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


@pytest.fixture
def options(tmp_path: Path) -> IngestOptions:
    return IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=32)


def test_stores_pages_passages_file_and_job(sessions, options, count_tokens, tmp_path) -> None:
    path = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="contract.pdf")
    stages: list[str] = []

    outcome = ingest_file(
        path, sessions=sessions, options=options, count_tokens=count_tokens, on_stage=stages.append
    )

    assert outcome.status == STORED, outcome.reason
    assert stages == ["hashing", "parsing", "splitting", "storing"]
    with sessions() as session:
        document = documents.get_document(session=session, document_id=outcome.document_id)
        assert document.kind == "legal"
        assert document.num_pages == 4
        assert document.num_tokens > 0
        pages = documents.get_pages(session=session, document_id=document.id)
        assert [p.number for p in pages] == [1, 2, 3, 4]
        assert pages[2].text == ""
        assert "Governing law" in pages[1].text
        passages = documents.get_passages(session=session, document_id=document.id)
        assert len(passages) == outcome.num_passages > 1
        assert all(p.num_tokens <= 32 for p in passages)
        assert {p.first_page for p in passages} >= {1, 2, 4}
        assert Path(document.stored_path).read_bytes() == path.read_bytes()
        job = session.get(Job, outcome.job_id)
        assert job.status == JobStatus.SUCCEEDED
        assert job.document_id == document.id
        assert job.stats["num_passages"] == len(passages)


def test_same_content_is_not_parsed_again(sessions, options, count_tokens, tmp_path) -> None:
    first = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="a.pdf")
    copy = tmp_path / "copy-of-a.pdf"
    copy.write_bytes(first.read_bytes())
    stored = ingest_file(first, sessions=sessions, options=options, count_tokens=count_tokens)
    stages: list[str] = []

    again = ingest_file(
        copy, sessions=sessions, options=options, count_tokens=count_tokens, on_stage=stages.append
    )

    assert again.status == PRESENT
    assert again.document_id == stored.document_id
    assert "parsing" not in stages


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda d: pdf_factory.not_a_pdf(d), "not_a_pdf"),
        (lambda d: pdf_factory.image_only_pdf(d), "no_text_layer"),
        (lambda d: pdf_factory.garbage_pdf(d), "damaged_pdf"),
    ],
)
def test_bad_files_are_refused_with_a_sentence(
    sessions, options, count_tokens, tmp_path, make, code
) -> None:
    outcome = ingest_file(
        make(tmp_path), sessions=sessions, options=options, count_tokens=count_tokens
    )

    assert outcome.status == REFUSED
    assert outcome.error_code == code
    assert outcome.reason.endswith(".") and "Traceback" not in outcome.reason
    with sessions() as session:
        job = session.get(Job, outcome.job_id)
        assert job.status == JobStatus.FAILED
        assert (job.error_code, job.error) == (code, outcome.reason)
        assert documents.list_documents(session=session) == []


def test_encrypted_needs_its_password(sessions, options, count_tokens, tmp_path) -> None:
    plain = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="plain.pdf")
    locked = pdf_factory.encrypted_pdf(
        plain, user_password="s3cret", owner_password="owner-pw", name="locked.pdf"
    )

    without = ingest_file(locked, sessions=sessions, options=options, count_tokens=count_tokens)
    wrong = ingest_file(
        locked,
        sessions=sessions,
        options=IngestOptions(files_dir=options.files_dir, password="nope"),
        count_tokens=count_tokens,
    )
    right = ingest_file(
        locked,
        sessions=sessions,
        options=IngestOptions(files_dir=options.files_dir, password="s3cret"),
        count_tokens=count_tokens,
    )

    assert (without.status, without.error_code) == (REFUSED, "password_required")
    assert (wrong.status, wrong.error_code) == (REFUSED, "wrong_password")
    assert right.status == STORED


def test_limits_refuse_before_parsing(sessions, count_tokens, tmp_path) -> None:
    path = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="big.pdf")
    tight = IngestOptions(files_dir=tmp_path / "files", limits=ParseLimits(max_bytes=100))
    few_pages = IngestOptions(files_dir=tmp_path / "files", limits=ParseLimits(max_pages=2))

    too_big = ingest_file(path, sessions=sessions, options=tight, count_tokens=count_tokens)
    too_long = ingest_file(path, sessions=sessions, options=few_pages, count_tokens=count_tokens)

    assert too_big.error_code == "too_large"
    assert too_long.error_code == "too_many_pages"


def test_folders_yield_their_pdfs_sorted(tmp_path) -> None:
    (tmp_path / "sub").mkdir()
    for name in ("b.pdf", "a.PDF", "notes.txt", "sub/c.pdf"):
        (tmp_path / name).write_bytes(b"%PDF-1.4")
    explicit = tmp_path / "notes.txt"

    found = list(pdf_paths([tmp_path, explicit]))

    assert [p.name for p in found] == ["a.PDF", "b.pdf", "c.pdf", "notes.txt"]


def test_ingest_itself_keeps_no_job_and_stores_only_in_the_callers_commit(
    sessions, options, count_tokens, tmp_path
) -> None:
    path = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="contract.pdf")

    read = read_pdf(path, sessions=sessions, options=options, count_tokens=count_tokens)
    assert isinstance(read, ReadPdf) and read.file_name == "contract.pdf"
    with sessions() as session:
        stored = store_read(session, read, files_dir=options.files_dir)
        assert stored.status == STORED and stored.num_passages == len(read.passages)
        session.rollback()  # the caller did not commit: nothing stays
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Document)) == 0
        assert session.scalar(select(func.count()).select_from(Job)) == 0

    with pytest.raises(UnreadableFile, match="LongDoc cannot read this file"):
        read_pdf(
            tmp_path / "gone.pdf", sessions=sessions, options=options, count_tokens=count_tokens
        )


def test_a_legal_pdf_without_a_metadata_title_takes_its_first_pages(
    sessions, options, count_tokens, tmp_path
) -> None:
    opinion = pdf_factory.text_pdf(
        tmp_path,
        [
            "UNITED STATES DISTRICT COURT\n\nACME CORP., Plaintiff,\nv.\nBETA INC., Defendant.\n\n"
            "OPINION AND ORDER\n\nThe plaintiff sued the defendant for breach of contract. The "
            "court grants the motion for summary judgment.",
        ],
        name="scan_0042.pdf",
    )
    contract = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="contract.pdf")
    titled = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES[1:], name="t.pdf", title="Own Title")
    titles = {}
    for path in (opinion, contract, titled):
        outcome = ingest_file(path, sessions=sessions, options=options, count_tokens=count_tokens)
        assert outcome.status == STORED, outcome.reason
        with sessions() as session:
            document = documents.get_document(session=session, document_id=outcome.document_id)
            titles[path.name] = document.title
    assert titles == {
        "scan_0042.pdf": "ACME CORP. v. BETA INC.",
        "contract.pdf": "SERVICES AGREEMENT",
        "t.pdf": "Own Title",  # the metadata's title comes first
    }


def test_the_store_transaction_takes_sqlites_write_lock_first(count_tokens, tmp_path) -> None:
    # As results are saved (app.db.session.write_transaction): it reads (is the file there
    # already?) then writes, so a deferred BEGIN could fail with "database is locked".
    from sqlalchemy import event

    from app.db.session import make_engine, session_factory
    from app.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'longdoc.db'}"
    upgrade(url)
    engine = make_engine(url)
    begins: list[str] = []

    @event.listens_for(engine, "connect")
    def _trace(dbapi_connection, _record) -> None:
        dbapi_connection.set_trace_callback(
            lambda statement: begins.append(statement) if statement.startswith("BEGIN") else None
        )

    sessions = session_factory(engine)
    path = pdf_factory.text_pdf(tmp_path, CONTRACT_PAGES, name="contract.pdf")
    options = IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=32)
    read = read_pdf(path, sessions=sessions, options=options, count_tokens=count_tokens)
    assert isinstance(read, ReadPdf)
    begins.clear()
    with sessions() as session:
        stored = store_read(session, read, files_dir=options.files_dir)
        session.commit()
    engine.dispose()

    assert stored.status == STORED
    assert begins == ["BEGIN IMMEDIATE"]
