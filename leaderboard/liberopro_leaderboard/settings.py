"""Settings of the leaderboard site (environment variables ``LIBEROPRO_LEADERBOARD_*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class LeaderboardSettings(BaseSettings):
    """Where the methodology's catalog comes from, and the cache sizes."""

    model_config = SettingsConfigDict(env_prefix="LIBEROPRO_LEADERBOARD_", extra="ignore")

    catalog: Path | None = Field(
        None, description="Catalog snapshot (``python -m liberopro_leaderboard catalog --out FILE``); unset: "
        "import the evaluator's catalog in-process on first use (needs the simulator installed).")
    warm_catalog: bool = Field(False, description="Load the catalog in the background when the app starts.")
    result_cache_entries: int = Field(5000, ge=1, description="Public views of results kept in memory.")
    chart_cache_entries: int = Field(512, ge=1, description="Rendered SVG charts kept in memory.")
    heatmap_rows: int = Field(20, ge=1, description="Submissions drawn in the shift heatmap (the first in the current order).")
