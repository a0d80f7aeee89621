"""The monitoring page, empty and with the stats the worker records on jobs and results."""

from __future__ import annotations

from app.db.models import JobKind
from app.services import jobs, results
from tests.ui.conftest import all_text, open_page
from tests.ui.seed import add_document


def engine_call(tokens: int, seconds: float, chunks: list[int], **extra) -> dict:
    return {
        "num_prompt_tokens": tokens,
        "prefill_seconds": seconds,
        "chunk_sizes": chunks,
        "num_decode_tokens": 20,
        "decode_seconds": 1.0,
        "peak_memory_bytes": 300 * 2**20,
        "fallbacks": extra.get("fallbacks", []),
        "device": "cpu",
        "attention_backend": "sdpa",
    }


def charts(at) -> list:
    return at.get("vega_lite_chart")


def test_without_data_the_page_says_what_will_appear(app_test, ui_settings) -> None:
    at = open_page(app_test(), "views/monitoring.py")
    assert not at.exception
    assert "No model requests yet" in all_text(at)
    assert charts(at) == []
    metrics = {m.label: m.value for m in at.main.metric}
    assert metrics["Model requests"] == "0" and metrics["Median prefill"] == "—"


def test_with_jobs_every_chart_is_drawn_from_their_stats(app_test, ui_settings, sessions) -> None:
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Lease")
        for i in range(6):
            job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=document.id)
            jobs.start_job(session=session, job_id=job.id)
            calls = [
                engine_call(1000 + 100 * i, 0.5 + 0.1 * i, [512, 488 + 100 * i]),
                engine_call(200, 0.1, [200], fallbacks=[{"kind": "truncated"}] if i == 5 else []),
            ]
            results.save_summary(
                session=session,
                job_id=job.id,
                document_id=document.id,
                method="hierarchical",
                text="s",
                model="m",
                stats={"calls": calls},
            )
            totals = {
                "num_prompt_tokens": sum(c["num_prompt_tokens"] for c in calls),
                "prefill_seconds": sum(c["prefill_seconds"] for c in calls),
                "num_decode_tokens": 40,
                "decode_seconds": 2.0,
            }
            jobs.finish_job(session=session, job_id=job.id, stats=totals)
        jobs.create_job(session=session, kind=JobKind.ANSWER, document_id=document.id)  # waiting
        session.commit()
    at = open_page(app_test(), "views/monitoring.py")
    assert not at.exception
    metrics = {m.label: m.value for m in at.main.metric}
    assert metrics["Model requests"] == "12"
    assert metrics["Median prefill"] == "0.30 s"  # halfway between 0.1 (six times) and 0.5
    assert metrics["P99 prefill"] == "0.99 s"
    assert metrics["Fallbacks taken"] == "1"
    assert metrics["Highest peak memory"] == "300.0 MB"
    titles = [chart.proto.spec for chart in charts(at)]
    for title in (
        "Prefill time against prompt tokens",
        "Prefill time distribution",
        "Prefill chunks per request",
        "Chunk sizes used",
        "Peak memory",
        "Fallbacks taken",
        "Throughput over time",
        "Queue depth",
    ):
        assert sum(title in spec for spec in titles) == 1, title
    (distribution,) = [spec for spec in titles if "Prefill time distribution" in spec]
    assert '"rule"' in distribution  # the median and P99 lines over the histogram
    sidebar = " ".join(m.value for m in at.sidebar.caption).replace("\\", "")
    assert "sdpa" in sidebar and "last used: cpu" in sidebar


def test_chunk_sizes_are_a_histogram_of_chunks_per_size_range() -> None:
    from ui.components.charts import chunk_sizes

    # Full chunks of 512 and a last chunk of its own size per prompt: 9 chunks in all.
    spec = chunk_sizes({97: 1, 120: 1, 133: 1, 488: 1, 512: 5}).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert {row["chunk size"]: row["times used"] for row in rows} == {
        97: 1, 120: 1, 133: 1, 488: 1, 512: 5
    }  # fmt: skip
    x, y = spec["encoding"]["x"], spec["encoding"]["y"]
    assert x["field"] == "chunk size" and x["type"] == "quantitative" and x["bin"]
    # Bars add up the chunks of a range, not one bar of height 1 per distinct size.
    assert (y["field"], y["aggregate"]) == ("times used", "sum")
    assert y["axis"]["format"] == "d"


def test_the_sidebar_says_device_then_the_last_one_used(app_test, ui_settings, sessions) -> None:
    with sessions() as session:
        document = add_document(session, ui_settings.files_dir, title="Lease")
        job = jobs.create_job(session=session, kind=JobKind.SUMMARIZE, document_id=document.id)
        jobs.start_job(session=session, job_id=job.id)
        calls = [engine_call(100, 0.1, [100])]
        results.save_summary(
            session=session, job_id=job.id, document_id=document.id, method="one_pass",
            text="s", model="m", stats={"calls": calls},
        )  # fmt: skip
        jobs.finish_job(session=session, job_id=job.id, stats={"num_prompt_tokens": 100})
        session.commit()
    at = open_page(app_test(), "views/monitoring.py")
    assert not at.exception
    (device,) = [m.value for m in at.sidebar.caption if "Device:" in m.value]
    assert device.replace("\\", "").endswith(" (last used: cpu)")
    assert "auto(" not in device and "  " not in device
