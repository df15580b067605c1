"""Platform API (FastAPI): submissions, tokens, admin."""
