"""LIBERO-Pro2.0 platform: submissions API, queue, sandboxed evaluation (issue 4)."""
