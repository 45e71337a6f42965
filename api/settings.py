"""The one place that reads configuration (environment, prefix ``PONTUAL_``)."""

from __future__ import annotations

from functools import lru_cache
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path

import platformdirs
from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from geo.calendar import DEFAULT_TIMEZONE


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
    timezone: str = DEFAULT_TIMEZONE
    # LGPD: raw fixes older than this many whole UTC days are deleted by `pontual db retention`
    # (evidence of findings and proposals excepted).
    retention_days: int = Field(default=365, gt=0)
    # HTTP API (pontual serve)
    token_ttl_s: int = Field(default=8 * 3600, gt=0)
    public_rate_limit_per_min: int = Field(default=60, gt=0)
    # Logins per client IP and minute: a bucket of its own (public traffic cannot lock staff out)
    login_rate_limit_per_min: int = Field(default=20, gt=0)
    # Failed logins per account (its name, trimmed and case-folded, whether it exists or not)
    # per window, from any address: then every login of that name, the right password too, is
    # 429 until the window ends. Good logins neither count nor reset the count. 10 per 15 min
    # lets a person mistype and try again, and caps guessing at 960 a day per account
    login_failures_per_account: int = Field(default=10, gt=0)
    login_failure_window_s: float = Field(default=900.0, gt=0)
    # An address the account logged in from within these days keeps a quota of its own (the
    # same number): others' guesses cannot lock the owner out of it (held in memory)
    login_familiar_days: float = Field(default=30.0, gt=0)
    # Proxies whose X-Forwarded-For is believed (comma-separated IPs or networks, e.g.
    # "10.0.0.5,192.168.1.0/24"); empty: the header is ignored and the peer is the client
    trusted_proxies: str = ""
    public_recent_fix_s: float = Field(default=600.0, gt=0)
    public_max_radius_m: float = Field(default=5000.0, gt=0)
    ingest_max_batch: int = Field(default=1000, gt=0)
    # A device token found valid is trusted this long without asking the database again (a
    # revoked token is refused within this delay); 0 asks every time.
    device_token_cache_s: float = Field(default=10.0, ge=0)
    # Live alerts (engines/live.py, api/alerts.py)
    alert_throttle_s: float = Field(default=900.0, ge=0)
    webhook_max_attempts: int = Field(default=6, gt=0)
    webhook_backoff_s: float = Field(default=2.0, gt=0)
    webhook_timeout_s: float = Field(default=5.0, gt=0)
    # Key of the webhook secrets' encryption (Fernet, urlsafe base64 of 32 bytes); empty: the
    # file ``secret.key`` of the data directory, created on first use (api/crypto.py)
    secret_key: SecretStr | None = None
    # Live detection of ingested fixes (api/live_worker.py): a worker in each server process,
    # or none (then run ``python -m api.live_worker`` beside the servers)
    live_worker: bool = True
    # A vehicle whose live detection failed (dead letter) is retried after this many seconds,
    # doubled at each new failure up to live_retry_max_s (``pontual alerts retry``: at once)
    live_retry_s: float = Field(default=60.0, gt=0)
    live_retry_max_s: float = Field(default=3600.0, gt=0)
    # Live ingest (HTTP, OsmAnd) refuses fixes older than this many days (``too_old_timestamp``)
    # or later than now + future_tolerance_s (``future_timestamp``); file imports keep history
    ingest_max_age_days: float = Field(default=7.0, gt=0)
    ingest_future_tolerance_s: float = Field(default=300.0, ge=0)
    # Largest request body accepted (bytes), checked before it is read: 413 beyond
    max_body_bytes: int = Field(default=2 * 1024 * 1024, gt=0)
    # Longest wait for the next chunk of a request body (seconds): then 408 and the connection
    # closed (a client that stalls mid-upload holds no connection); a steady upload is never cut
    body_read_timeout_s: float = Field(default=30.0, gt=0)
    # Longest database statement of a request (the server's connections): a runaway query is
    # cancelled (503 database_timeout) instead of holding a connection for good
    statement_timeout_s: float = Field(default=120.0, gt=0)
    # Background of the web console's maps: a tile URL template ({z}/{x}/{y}, e.g.
    # https://tile.openstreetmap.org/{z}/{x}/{y}.png) and its attribution; empty: the offline
    # basemap (bundled municipal boundaries and road network, api/web/basemap.py)
    tiles_url: str = ""
    tiles_attribution: str = ""

    @field_validator("tiles_url")
    @classmethod
    def _valid_tiles(cls, value: str) -> str:
        value = value.strip()
        if value and (
            not value.startswith(("https://", "http://"))
            or not all(k in value for k in ("{z}", "{x}", "{y}"))
        ):
            msg = (
                f"PONTUAL_TILES_URL: '{value}' não é um modelo de URL de tiles "
                "(http(s)://…/{z}/{x}/{y}.png) nem vazio (mapa de fundo offline)"
            )
            raise ValueError(msg)
        return value

    # The database holds the simulated fleet of `pontual demo --console`: every page of the web
    # console says that the vehicles' movements are simulated
    simulated_data: bool = False

    @field_validator("trusted_proxies")
    @classmethod
    def _valid_proxies(cls, value: str) -> str:
        proxy_networks(value)
        return value


def proxy_networks(value: str) -> tuple[IPv4Network | IPv6Network, ...]:
    """Parse ``trusted_proxies``; raise ValueError (pt-BR) naming a bad entry."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        try:
            out.append(ip_network(item, strict=False))
        except ValueError:
            msg = f"PONTUAL_TRUSTED_PROXIES: '{item}' não é um IP nem uma rede (ex.: 10.0.0.0/8)"
            raise ValueError(msg) from None
    return tuple(out)


@lru_cache
def get_settings() -> Settings:
    """Return the cached settings."""
    return Settings()
