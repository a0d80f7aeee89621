"""The UI process serves its Prometheus metrics on LONGDOC_METRICS_PORT: the queues' depth, and
the jobs it queued (a question asked on the document page), read from the real endpoint."""

from __future__ import annotations

import urllib.request

from app.settings import get_settings
from tests.ui.conftest import open_page
from tests.ui.seed import add_document
from tests.worker.redis_server import spare_port


def _scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()


def _value(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split(" ")[1])
    return 0.0


def test_the_ui_serves_its_metrics_and_counts_the_jobs_it_queues(
    app_test, ui_settings, sessions, monkeypatch
) -> None:
    port = spare_port()
    monkeypatch.setenv("LONGDOC_METRICS_PORT", str(port))
    get_settings.cache_clear()
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Lease")
        session.commit()
    at = open_page(app_test(), "views/document.py", doc=str(document.id))
    before = _scrape(port)
    queued = 'longdoc_jobs_total{kind="answer",status="queued"}'
    assert 'longdoc_queue_depth{queue="gpu"}' in before

    at.chat_input(key="question").set_value("What is the rent?").run()
    assert not at.exception

    assert _value(_scrape(port), queued) == _value(before, queued) + 1
