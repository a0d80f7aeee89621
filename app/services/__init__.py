"""Service functions: keyword-only arguments, a session passed in, None for not found."""
