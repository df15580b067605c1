"""The submitter's client configuration (``liberopro submit/status/cancel``): the platform's URL
and the submitter's token, from ``LIBEROPRO_API_URL`` / ``LIBEROPRO_TOKEN`` or a TOML file
(``LIBEROPRO_CONFIG``, default ``~/.config/liberopro/platform.toml``)::

    api_url = "https://platform.example.org"
    token = "lp_..."

Read by :func:`liberopro_platform.submitter_cli.load_client_config`, which imports this module
only when a command needs it (pydantic-settings takes ~0.2 s to import).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

#: The config file when ``LIBEROPRO_CONFIG`` is not set.
DEFAULT_CONFIG = Path("~/.config/liberopro/platform.toml")


def client_config_path() -> Path:
    """The submitter's config file: ``LIBEROPRO_CONFIG``, else :data:`DEFAULT_CONFIG` (``~`` expanded)."""
    return Path(os.environ.get("LIBEROPRO_CONFIG", str(DEFAULT_CONFIG))).expanduser()


class ClientConfig(BaseSettings):
    """Where the submitter's commands reach the platform, and as whom.

    Each field comes from its environment variable (``LIBEROPRO_API_URL``, ``LIBEROPRO_TOKEN``;
    an empty one counts as unset), else from the same key in the TOML file
    :func:`client_config_path` names (when it is a file), else None. Numbers in the file are taken
    as strings; other keys are ignored. Variable names match regardless of case (pydantic-settings'
    default, as for the platform's :class:`liberopro_platform.config.Settings`). Raises
    :class:`tomllib.TOMLDecodeError` for a file that is not TOML, :class:`pydantic.ValidationError`
    for a value of another type.
    """

    model_config = SettingsConfigDict(
        env_prefix="LIBEROPRO_", env_ignore_empty=True, extra="ignore", coerce_numbers_to_str=True
    )

    api_url: str | None = Field(None, description="Base URL of the platform API, e.g. https://platform.example.org.")
    token: str | None = Field(
        None, description="The submitter's API token (lp_...; `python -m liberopro_platform create-user`)."
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # the environment first, then the file; no .env file and no secrets directory
        return init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=client_config_path())
