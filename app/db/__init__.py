"""The database: typed models (models.py) and engine/session construction (session.py)."""
