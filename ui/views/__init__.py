"""The pages of st.navigation; each file runs as a script (see ui/app.py)."""
