"""LIBERO-Pro2.0 public leaderboard: pages and API (issue 5)."""
