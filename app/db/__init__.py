"""The database: typed models (the models/ package, one module per area) and engine/session construction (session.py)."""
