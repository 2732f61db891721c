"""Database URLs that never print their password."""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from cdc_assets.errors import ConfigError

SCHEMES = {"mysql": "mysql", "mariadb": "mysql", "postgres": "postgres", "postgresql": "postgres", "mongodb": "mongo"}
DEFAULT_PORTS = {"mysql": 3306, "postgres": 5432, "mongo": 27017}


@dataclass(frozen=True)
class DbUrl:
    """A parsed `scheme://user:password@host:port/database?k=v` URL.

    `str()` and `repr()` mask the password; `password` is only read by code that connects.
    """

    db_type: str
    host: str
    port: int
    user: str = ""
    password: str = field(default="", repr=False)
    database: str = ""
    params: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, raw: str, key: str = "url") -> "DbUrl":
        parts = urlsplit(raw)
        db_type = SCHEMES.get(parts.scheme)
        if db_type is None:
            raise ConfigError(
                f"{key}: unsupported scheme '{parts.scheme}://'",
                "use mysql://, postgresql:// or mongodb://",
            )
        try:
            port = parts.port or DEFAULT_PORTS[db_type]
        except ValueError as exc:
            raise ConfigError(f"{key}: invalid port in {mask(raw)}", "write host:port with a number") from exc
        return cls(
            db_type=db_type,
            host=parts.hostname or "127.0.0.1",
            port=port,
            user=unquote(parts.username or ""),
            password=unquote(parts.password or ""),
            database=parts.path.lstrip("/"),
            params=tuple(parse_qsl(parts.query)),
        )

    def with_database(self, database: str) -> "DbUrl":
        return DbUrl(self.db_type, self.host, self.port, self.user, self.password, database, self.params)

    def render(self, *, masked: bool = True) -> str:
        scheme = {"mysql": "mysql", "postgres": "postgresql", "mongo": "mongodb"}[self.db_type]
        auth = ""
        if self.user:
            secret = ("***" if masked else quote(self.password, safe="")) if self.password else ""
            auth = quote(self.user, safe="") + (f":{secret}" if secret else "") + "@"
        query = "&".join(f"{k}={v}" for k, v in self.params)
        return f"{scheme}://{auth}{self.host}:{self.port}/{self.database}" + (f"?{query}" if query else "")

    def __str__(self) -> str:
        return self.render(masked=True)


def mask(raw: str) -> str:
    """Mask the password of a URL string that may not even parse."""
    parts = urlsplit(raw)
    if parts.password is None:
        return raw
    return raw.replace(f":{parts.password}@", ":***@", 1)
