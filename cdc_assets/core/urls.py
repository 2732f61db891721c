"""Database URLs that never print their password.

MySQL/MariaDB/PostgreSQL URLs are parsed and rendered by SQLAlchemy's `make_url`/`URL`, whose grammar and
percent-encoding are the ones every Python database tool already agrees on. MongoDB URLs are not: a seed list
(`mongodb://h1:27017,h2:27017/?replicaSet=rs0`) makes `make_url` fail on the port, so for `mongodb://` this module
keeps the host list as written (`seeds`) and parses only what it must; pymongo is the one that reads such a URL.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qsl, quote, unquote

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from cdc_assets.errors import MASK, ConfigError

SCHEMES = {"mysql": "mysql", "mariadb": "mysql", "postgres": "postgres", "postgresql": "postgres", "mongodb": "mongo"}
DEFAULT_PORTS = {"mysql": 3306, "postgres": 5432, "mongo": 27017}
RENDERED_SCHEMES = {"mysql": "mysql", "postgres": "postgresql", "mongo": "mongodb"}
SCHEME_HINT = "use mysql://, mariadb://, postgresql:// or mongodb://"

# `scheme://user:password@`: the password runs to the last `@` before the path, as a URL parser reads it.
_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*:)[^\s/?#]*(@)")
_MONGO_PARTS = re.compile(r"([^/?#]*)(?:/([^?#]*))?(?:\?([^#]*))?")


@dataclass(frozen=True)
class DbUrl:
    """A parsed `scheme://user:password@host:port/database?k=v` URL.

    `str()` and `repr()` mask the password; `password` is only read by code that connects. `params` are sorted
    by key, the order SQLAlchemy renders them in, so parse(render()) is the same URL; a repeated key keeps its values
    in order (consumers read them as a dict: the last one wins). `seeds` is a MongoDB URL's host list as
    written (`host` and `port` are its first member); empty for the other schemes.
    """

    db_type: str
    host: str
    port: int
    user: str = ""
    password: str = field(default="", repr=False)
    database: str = ""
    params: tuple[tuple[str, str], ...] = ()
    seeds: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: str, key: str = "url") -> "DbUrl":
        """Raises ConfigError naming `key` (never the password) for an unknown scheme or a malformed URL."""
        if raw.startswith("mongodb://"):
            return _parse_mongo(raw, key)
        try:
            url = make_url(raw)
        except ArgumentError:
            raise ConfigError(f"{key} is not a database URL",  # not echoed: where would its password be?
                              "write scheme://user:password@host:port/database") from None
        except ValueError:  # only the port is converted while parsing
            raise ConfigError(f"{key}: invalid port in {mask(raw)}", "write host:port with a number") from None
        db_type = SCHEMES.get(url.get_backend_name())
        if db_type is None or db_type == "mongo":
            raise ConfigError(f"{key}: unsupported scheme '{url.drivername}://'", SCHEME_HINT)
        _refuse_ambiguous_at(raw, key)
        return cls(
            db_type=db_type,
            host=url.host or "127.0.0.1",
            port=_checked_port(url.port, db_type, raw, key),
            user=url.username or "",
            password=url.password or "",
            database=url.database or "",
            params=tuple((k, v) for k, values in sorted(url.query.items())
                         for v in (values if isinstance(values, tuple) else (values,))),
        )

    def with_database(self, database: str) -> "DbUrl":
        return replace(self, database=database)

    def render(self, *, masked: bool = True) -> str:
        if self.db_type == "mongo":
            return self._render_mongo(masked)
        query: dict[str, str | tuple[str, ...]] = {}
        for k, v in self.params:
            query[k] = (*query[k], v) if isinstance(query.get(k), tuple) else (query[k], v) if k in query else v
        url = URL.create(RENDERED_SCHEMES[self.db_type], username=self.user or None, password=self.password or None,
                         host=self.host, port=self.port, database=self.database or None, query=query)
        rendered = url.render_as_string(hide_password=masked)
        if self.database:
            return rendered
        # SQLAlchemy drops the path when there is no database; the `/` is kept so a server's URL reads the same as before
        base, question, query = rendered.partition("?")
        return f"{base}/{question}{query}"

    def _render_mongo(self, masked: bool) -> str:
        auth = ""
        if self.user:
            secret = (MASK if masked else quote(self.password, safe="")) if self.password else ""
            auth = quote(self.user, safe="") + (f":{secret}" if secret else "") + "@"
        hosts = ",".join(self.seeds) or f"{self.host}:{self.port}"
        query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in self.params)
        return f"mongodb://{auth}{hosts}/{self.database}" + (f"?{query}" if query else "")

    def __str__(self) -> str:
        return self.render(masked=True)


def mask(text: str) -> str:
    """`text` with the password of every `scheme://user:password@` in it masked; the URL need not parse."""
    return _PASSWORD.sub(rf"\1{MASK}\2", text)


def _checked_port(port: int | None, db_type: str, raw: str, key: str) -> int:
    if port is None:
        return DEFAULT_PORTS[db_type]
    if not 0 < port < 65536:
        raise ConfigError(f"{key}: port {port} out of range in {mask(raw)}", "a TCP port is 1..65535")
    return port


def _refuse_ambiguous_at(raw: str, key: str) -> None:
    """SQLAlchemy ends the password at the first `@`, so a raw `@` in it would leave the rest in the host: refused."""
    netloc = re.split(r"[/?#]", raw.partition("://")[2], maxsplit=1)[0]
    if netloc.count("@") > 1:
        raise ConfigError(f"{key}: more than one '@' before the host in {mask(raw)}",
                          "percent-encode '@' in the user or password as %40")


def _parse_mongo(raw: str, key: str) -> DbUrl:
    """Only what DbUrl holds; pymongo reads the URL itself (SRV, options) when it connects."""
    netloc, path, query = _MONGO_PARTS.match(raw.removeprefix("mongodb://")).groups(default="")
    userinfo, at, hostlist = netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    seeds = tuple(s for s in hostlist.split(",") if s)
    if not seeds:
        raise ConfigError(f"{key}: no host in {mask(raw)}", "write mongodb://user:password@host:port,host:port/")
    hosts = []
    for seed in seeds:
        host, port_text = (seed[1:].partition("]")[::2] if seed.startswith("[") else seed.partition(":")[::2])
        port_text = port_text.removeprefix(":") if seed.startswith("[") else port_text
        if port_text and not port_text.isdigit():
            raise ConfigError(f"{key}: invalid port in {mask(raw)}", "write host:port with a number")
        hosts.append((host, _checked_port(int(port_text) if port_text else None, "mongo", raw, key)))
    return DbUrl(
        db_type="mongo",
        host=hosts[0][0] or "127.0.0.1",
        port=hosts[0][1],
        user=unquote(user),
        password=unquote(password),
        database=unquote(path),
        params=tuple(parse_qsl(query)),
        seeds=seeds,
    )
