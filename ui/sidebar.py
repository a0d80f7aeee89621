"""The sidebar: which model runs where, and whether the queue is moving."""

from __future__ import annotations

import streamlit as st

from app.db.models import JobKind, JobStatus
from app.errors import AppError
from app.services import dispatch, jobs, monitoring
from app.services.access import Actor
from app.settings import DEFAULT_MODEL
from ui import context as ctx

STATUS_POLL_S = 5.0
PING_CACHE_S = 10
PING_TIMEOUT_S = 0.5


@st.cache_data(ttl=PING_CACHE_S, show_spinner=False)
def _broker_status(_cache_key: str) -> dispatch.BrokerStatus:
    # The key names the broker; the settings are read again (they are not hashable).
    return dispatch.broker_status(ctx.settings(), timeout_s=PING_TIMEOUT_S)


def _model_label(model: str) -> str:
    return "SmolLM2-135M-Instruct (built in)" if model == DEFAULT_MODEL else model.rsplit("/")[-1]


def _engine_facts() -> tuple[str, str]:
    """(device, attention backend) the last model request used, from its stats."""
    with ctx.session() as db:
        records = monitoring.load_job_records(
            session=db, limit=20, kinds=(JobKind.SUMMARIZE, JobKind.ANSWER)
        )
    latest = monitoring.latest_engine(monitoring.request_points(records))
    return latest or ("", "")


def _status() -> None:
    settings = ctx.settings()
    try:
        device, backend = _engine_facts()
        with ctx.session() as db:
            counts = jobs.count_by_status(session=db)
    except AppError as error:
        st.error(str(error))
        return
    st.markdown("**Engine**")
    st.caption(f":material/neurology: Model: {ctx.md_escape(_model_label(settings.model))}")
    configured = settings.engine_device
    # md_escape trims the text it is given: the space goes before it, not in it.
    measured = " " + ctx.md_escape(f"(last used: {device})") if device else ""
    st.caption(f":material/memory: Device: {ctx.md_escape(configured)}{measured}")
    st.caption(f":material/bolt: Attention: {ctx.md_escape(backend) if backend else 'not run yet'}")

    st.markdown("**Queue**")
    status = _broker_status(f"{settings.broker_url}|{settings.data_dir}")
    left, right = st.columns(2)
    workers = "?" if status.worker_names is None else str(len(status.worker_names))
    left.metric("Workers", workers, help="Workers that answered a ping just now.")
    right.metric("Waiting", counts[JobStatus.QUEUED], help="Jobs queued, not yet started.")
    left.metric("Running", counts[JobStatus.RUNNING])
    right.metric("Failed", counts[JobStatus.FAILED])
    if status.worker_names is None:
        st.caption(":material/warning: The broker did not answer.")
    elif not status.worker_names:
        st.caption(":material/warning: No worker is running: start `longdoc up`.")
    # The scheme only: the URL may carry a password.
    broker = "embedded" if settings.is_embedded_broker else settings.broker_url.split(":", 1)[0]
    st.caption(f"Broker: {ctx.md_escape(broker)}")


def render_account(actor: Actor) -> None:
    """Who is signed in, and sign-out (accounts, issue 25)."""
    from ui import auth

    with st.sidebar:
        st.caption(f":material/person: {ctx.md_escape(actor.name)} ({actor.role.value})")
        if actor.user_id is not None and st.button("Sign out", icon=":material/logout:"):
            auth.sign_out()
            st.rerun()


def render() -> None:
    with st.sidebar:
        st.fragment(run_every=STATUS_POLL_S)(_status)()
