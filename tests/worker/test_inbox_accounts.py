"""Ingesting as a user (accounts): the inbox ingests as LONGDOC_INBOX_USER, its jobs carry the
owner, each is in the audit log as that user's upload from the inbox, a collection folder needs
the user's write grant, and an unknown or viewer user stops the scan rather than ingest as no
one; an ingest job with an owner (an upload) makes the stored document theirs."""

from __future__ import annotations

from pathlib import Path

from app.db.models import Collection, CollectionGrant, Document, Job, Role
from app.services import access, audit, jobs
from app.services.access import Actor
from tests.app.access_world import build_world
from tests.pipelines import pdf_factory
from tests.pipelines.contract_pdf import contract_pdf
from tests.pipelines.echo_model import count_words
from tests.worker.test_inbox import settle
from worker.inbox import scan_inbox
from worker.ingest.store import IngestOptions
from worker.jobs import ingest as runner_ingest


def _inbox(tmp_path: Path) -> Path:
    inbox = tmp_path / "inbox"
    (inbox / "Matter A").mkdir(parents=True)
    (inbox / "Matter B").mkdir()
    files = [
        pdf_factory.text_pdf(inbox, ["A lease of the orchard."], name="top.pdf"),
        pdf_factory.text_pdf(inbox / "Matter A", ["A lease in A."], name="in_a.pdf"),
        pdf_factory.text_pdf(inbox / "Matter B", ["A merger in B."], name="in_b.pdf"),
    ]
    settle(*files)
    return inbox


def test_the_inbox_ingests_as_its_user_into_the_collections_they_may_write(
    sessions, session, tmp_path: Path
) -> None:
    world = build_world(session)
    # edna may read Matter B, not write it (one she may not read: test below).
    session.add(
        CollectionGrant(
            user_id=world.user_ids["editor"], collection_id=world.collection_b, can_write=False
        )
    )
    session.commit()
    inbox = _inbox(tmp_path)
    files_dir = tmp_path / "files"
    assert (
        scan_inbox(sessions=sessions, inbox_dir=inbox, files_dir=files_dir, owner_name="mallory")
        == []
    )
    assert (
        scan_inbox(sessions=sessions, inbox_dir=inbox, files_dir=files_dir, owner_name="vera") == []
    )
    assert (inbox / "top.pdf").exists()  # nothing taken as no one

    queued = scan_inbox(sessions=sessions, inbox_dir=inbox, files_dir=files_dir, owner_name="edna")
    with sessions() as check:
        rows = [check.get(Job, job_id) for job_id in queued]
        taken = {job.params["file_name"]: job.params for job in rows}
        assert set(taken) == {"top.pdf", "in_a.pdf"}  # edna may not write Matter B
        assert {params["owner_id"] for params in taken.values()} == {world.user_ids["editor"]}
        assert taken["in_a.pdf"]["collection_id"] == world.collection_a
        uploads = [e for e in audit.list_events(session=check) if e.action == "upload"]
        assert sorted(e.target_ids[0] for e in uploads) == sorted(queued)
        assert {(e.user_name, e.origin) for e in uploads} == {("edna", "inbox")}
    assert (inbox / "Matter B" / "in_b.pdf").exists()


def test_a_folder_named_like_a_collection_its_user_may_not_read_is_a_new_one_of_theirs(
    sessions, session, tmp_path: Path
) -> None:
    """Names are unique per owner: edna may not read Matter B, so the folder "Matter B" is her
    own new collection (as if the other did not exist); the other is left as it was."""
    world = build_world(session)
    inbox = _inbox(tmp_path)
    queued = scan_inbox(
        sessions=sessions, inbox_dir=inbox, files_dir=tmp_path / "files", owner_name="edna"
    )
    edna = world.user_ids["editor"]
    with sessions() as check:
        rows = [check.get(Job, job_id) for job_id in queued]
        taken = {job.params["file_name"]: job.params for job in rows}
        assert set(taken) == {"top.pdf", "in_a.pdf", "in_b.pdf"}
        hers = check.get(Collection, taken["in_b.pdf"]["collection_id"])
        assert hers.id != world.collection_b
        assert (hers.name, hers.owner_id) == ("Matter B", edna)
        grant = check.get(CollectionGrant, (edna, hers.id))
        assert grant is not None and grant.can_write
        hidden = check.get(Collection, world.collection_b)
        assert (hidden.name, hidden.owner_id) == ("Matter B", None)
        assert check.get(CollectionGrant, (edna, hidden.id)) is None
        events = audit.list_events(session=check, user_name="edna")
        about = {i for e in events if e.target_kind == "collection" for i in e.target_ids}
        assert about == {hers.id}  # her new collection's creation; nothing of the other


def test_an_ingest_job_of_a_user_makes_the_document_theirs(sessions, session, tmp_path) -> None:
    world = build_world(session)
    path = contract_pdf(tmp_path, num_pages=2, law_page=2)
    edna = world.user_ids["editor"]
    with sessions() as writing:
        job = jobs.create_ingest_job(
            session=writing,
            params=jobs.IngestParams(file_name=path.name, path=str(path), owner_id=edna),
        )
        writing.commit()
        job_id = job.id
    runner_ingest.run_ingest(
        job_id,
        sessions=sessions,
        options=IngestOptions(files_dir=tmp_path / "files", passage_max_tokens=40),
        count_tokens=count_words,
    )
    with sessions() as check:
        document = check.get(Document, check.get(Job, job_id).document_id)
        assert document.owner_id == edna
        edna_actor = Actor(user_id=edna, name="edna", role=Role.EDITOR)
        assert access.can_write_document(session=check, actor=edna_actor, document_id=document.id)
        vera = Actor(user_id=world.user_ids["viewer"], name="vera", role=Role.VIEWER)
        assert not access.can_read_document(session=check, actor=vera, document_id=document.id)
