"""Settings of the leaderboard site (environment variables ``LIBEROPRO_LEADERBOARD_*``)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class LeaderboardSettings(BaseSettings):
    """Cache sizes and the heatmap's extent."""

    model_config = SettingsConfigDict(env_prefix="LIBEROPRO_LEADERBOARD_", extra="ignore")

    result_cache_entries: int = Field(5000, ge=1, description="Public views of results kept in memory.")
    chart_cache_entries: int = Field(512, ge=1, description="Rendered SVG charts kept in memory.")
    heatmap_rows: int = Field(
        20, ge=1, description="Submissions drawn in the shift heatmap (the first in the current order)."
    )
