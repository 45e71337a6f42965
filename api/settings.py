"""The one place that reads configuration (environment, prefix ``PONTUAL_``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import platformdirs
from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("pontual", appauthor=False))


class Settings(BaseSettings):
    """Runtime settings; library packages never import this, values are passed in."""

    model_config = SettingsConfigDict(env_prefix="PONTUAL_", extra="ignore")

    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "PONTUAL_DATABASE_URL")
    )
    data_dir: Path = Field(default_factory=_default_data_dir)
    db_port: int = 54329
    pg_bindir: Path | None = None
    timezone: str = "America/Sao_Paulo"


@lru_cache
def get_settings() -> Settings:
    """Return the cached settings."""
    return Settings()
