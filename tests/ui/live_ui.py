"""A running UI process (`python -m ui.launch`) and a client that speaks Streamlit's own
protocol to it: protobuf messages over the websocket, and the upload endpoint, as a browser
does. Used where AppTest cannot reach: Streamlit's HTTP routes and one process shared by many
sessions."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from http.cookies import SimpleCookie
from pathlib import Path

import requests
from websockets.sync.client import connect

from app.migrate import upgrade

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90.0
REPLY_TIMEOUT_S = 60.0
EARLY_FOR_RERUN = 2  # ForwardMsg.ScriptFinishedStatus: st.rerun() cut the run short


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class UIProcess:
    """`python -m ui.launch` on a fresh data folder, in its own process group."""

    def __init__(self, tmp_path: Path, **settings: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LONGDOC_")}
        env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
            LONGDOC_DATA_DIR=str(tmp_path / "data"),
            LONGDOC_DATABASE_URL=f"sqlite:///{tmp_path / 'ui.db'}",
            LONGDOC_INBOX_SCAN_ENABLED="false",
            LONGDOC_AUTO_SUMMARIZE_ENABLED="false",
            **settings,
        )
        upgrade(env["LONGDOC_DATABASE_URL"])
        self.log_path = tmp_path / "ui.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ui.launch", "--port", str(self.port)],
            env=env, cwd=tmp_path, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            health = f"{self.base}/_stcore/health"
            with contextlib.suppress(OSError), urllib.request.urlopen(health, timeout=2) as reply:
                if reply.read() == b"ok":
                    return
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"the UI did not start:\n{self.log()[-3000:]}")
            time.sleep(0.3)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self._log.close()


class Browser:
    """One browser session: the XSRF cookie, the websocket, the widgets the page drew."""

    def __init__(self, ui: UIProcess) -> None:
        self.ui = ui
        self.http = requests.Session()
        health = self.http.get(f"{ui.base}/_stcore/health", timeout=10)
        cookie = SimpleCookie(health.headers["set-cookie"])["_streamlit_xsrf"].value
        self.xsrf = cookie
        self.socket = connect(
            f"ws://127.0.0.1:{ui.port}/_stcore/stream",
            subprotocols=["streamlit", cookie],
            additional_headers={"Cookie": f"_streamlit_xsrf={cookie}", "Origin": ui.base},
            max_size=None,
        )
        self.session_id = ""
        self.widgets: dict[str, str] = {}  # label -> widget id
        self.texts: list[str] = []
        self.run()

    def run(self, widget_states: list | None = None) -> list[str]:
        """Run the page (with these widget states) and read until the script finished; the
        texts of the alerts, headings and markdown it drew."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        message = BackMsg()
        message.rerun_script.query_string = ""
        message.rerun_script.page_script_hash = ""
        for state in widget_states or []:
            message.rerun_script.widget_states.widgets.append(state)
        self.socket.send(message.SerializeToString())
        self.texts = []
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while time.monotonic() < deadline:
            forward = ForwardMsg()
            forward.ParseFromString(self.socket.recv(timeout=REPLY_TIMEOUT_S))
            kind = forward.WhichOneof("type")
            if kind == "new_session":
                self.session_id = forward.new_session.initialize.session_id
            elif kind == "delta" and forward.delta.WhichOneof("type") == "new_element":
                self._read_element(forward.delta.new_element)
            elif kind == "script_finished" and forward.script_finished != EARLY_FOR_RERUN:
                return self.texts
        raise AssertionError("the page did not finish running")

    def _read_element(self, element) -> None:
        kind = element.WhichOneof("type")
        if kind in ("text_input", "button"):
            widget = getattr(element, kind)
            self.widgets[widget.label] = widget.id
        elif kind == "alert":
            self.texts.append(element.alert.body)
        elif kind == "heading":
            self.texts.append(element.heading.body)

    def sign_in(self, password: str, name: str = "admin") -> list[str]:
        """As the first admin by default: the shared password's user (accounts, issue 25)."""
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        named = WidgetState(id=self.widgets["User name"], string_value=name)
        typed = WidgetState(id=self.widgets["Password"], string_value=password)
        pressed = WidgetState(id=self.widgets["Sign in"], trigger_value=True)
        texts = self.run([named, typed, pressed])
        return texts

    def upload(self, data: bytes, name: str = "upload.pdf") -> int:
        """PUT a file to the upload endpoint as the file uploader does; the HTTP status."""
        file_id = secrets.token_hex(8)
        reply = self.http.put(
            f"{self.ui.base}/_stcore/upload_file/{self.session_id}/{file_id}",
            files={"file": (name, data, "application/pdf")},
            headers={"X-Xsrftoken": self.xsrf},
            timeout=60,
        )
        return reply.status_code

    def close(self) -> None:
        self.socket.close()
        self.http.close()
