"""The UI's server: Streamlit's own, as an st.App with the upload gate in front.

`streamlit run ui/asgi_app.py` (what ui/launch.py starts) finds `app` and serves it with
uvicorn; every browser session still runs ui/main.py. The gate (ui/upload_gate.py) refuses
uploads from sessions that have not signed in.
"""

import streamlit as st
from starlette.middleware import Middleware

from ui.upload_gate import UploadGate

app = st.App("main.py", middleware=[Middleware(UploadGate)])
