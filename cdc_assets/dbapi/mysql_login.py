"""How our three connections to a MySQL server log in, from the URL's query parameters, and what to say when
one of them is refused.

The three: PyMySQL (`connect`), the binlog replication connection (pymysqlreplication, itself PyMySQL) and Spark's
JDBC driver (MariaDB Connector/J 2.7). They must agree on TLS and on how a password reaches the server.

MySQL 8's default plugin caching_sha2_password (MySQL 8.4 manual, "Caching SHA-2 Pluggable Authentication") logs a
client in with a SHA-256 scramble only when the server holds the account in its memory cache; otherwise (the first
login after a restart, FLUSH PRIVILEGES or ALTER USER) it asks for "full authentication", where the password itself
must cross the wire: in clear inside TLS, or RSA-encrypted (OAEP) with the server's public key. Without TLS the
client needs that key: it either has a copy (`server-public-key-path`) or asks the server for it, which a man in the
middle could answer with a key of its own. PyMySQL always asks when it has no copy; Connector/J asks only with
allowPublicKeyRetrieval=true. We let it ask too, so that the three behave alike and a default MySQL 8 works out of
the box; `server-public-key-path` pins the key for all three, and TLS avoids the question.

URL parameters, named as the `mysql` client's options (MySQL 8.4 manual, "Command Options for Encrypted Connections"):
    ssl-mode=PREFERRED (default) | DISABLED | REQUIRED | VERIFY_CA | VERIFY_IDENTITY
    ssl-ca=/path/ca.pem                             the CA that signed the server's certificate (VERIFY_*)
    server-public-key-path=/path/public_key.pem     the server's RSA public key (its caching_sha2_password_public_key_path)
PREFERRED is TLS when the server offers it for the PyMySQL connections (PyMySQL's own default); Connector/J 2.7
cannot fall back, so its connection stays plain TCP under PREFERRED. REQUIRED encrypts without checking the
certificate; VERIFY_CA checks it against ssl-ca; VERIFY_IDENTITY also checks that it names the URL's host.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import NETWORK_HINT, ConfigError, LoginError, UnreachableError, scrub

SSL_MODE, SSL_CA, SERVER_PUBLIC_KEY_PATH = "ssl-mode", "ssl-ca", "server-public-key-path"
KNOWN_PARAMETERS = (SSL_MODE, SSL_CA, SERVER_PUBLIC_KEY_PATH)

PYMYSQL = "the PyMySQL connection"
REPLICATION = "the binlog replication connection (PyMySQL)"
SPARK_JDBC = "the Spark JDBC connection (MariaDB Connector/J)"


class SslMode(str, Enum):
    PREFERRED = "PREFERRED"
    DISABLED = "DISABLED"
    REQUIRED = "REQUIRED"
    VERIFY_CA = "VERIFY_CA"
    VERIFY_IDENTITY = "VERIFY_IDENTITY"


@dataclass(frozen=True)
class MysqlLogin:
    """TLS and the server's RSA key, as one URL asks for them; the arguments each driver takes for that."""

    ssl_mode: SslMode = SslMode.PREFERRED
    ssl_ca: str = ""
    server_public_key_path: str = ""

    @classmethod
    def from_url(cls, url: DbUrl) -> "MysqlLogin":
        """Raises ConfigError on an unknown parameter, an unknown mode, or VERIFY_* without ssl-ca."""
        params = dict(url.params)
        unknown = sorted(set(params) - set(KNOWN_PARAMETERS))
        if unknown:
            raise ConfigError(f"{url}: unknown URL parameter(s) {unknown}",
                              f"a MySQL URL takes {', '.join(KNOWN_PARAMETERS)} (as the mysql client names them)")
        raw_mode = params.get(SSL_MODE, SslMode.PREFERRED.value).upper()
        try:
            mode = SslMode(raw_mode)
        except ValueError:
            raise ConfigError(f"{url}: ssl-mode={params[SSL_MODE]} is not a TLS mode",
                              "use one of " + ", ".join(m.value for m in SslMode)) from None
        login = cls(mode, params.get(SSL_CA, ""), params.get(SERVER_PUBLIC_KEY_PATH, ""))
        if login.verifies and not login.ssl_ca:
            raise ConfigError(f"{url}: ssl-mode={mode.value} checks the server's certificate but no ssl-ca is given",
                              "add ssl-ca=/path/to/ca.pem (the CA that signed the server's certificate)")
        if login.ssl_ca and mode in (SslMode.PREFERRED, SslMode.DISABLED):
            raise ConfigError(f"{url}: ssl-ca is given but ssl-mode={mode.value} never checks a certificate",
                              "set ssl-mode=VERIFY_CA or VERIFY_IDENTITY (or drop ssl-ca)")
        return login

    @property
    def verifies(self) -> bool:
        return self.ssl_mode in (SslMode.VERIFY_CA, SslMode.VERIFY_IDENTITY)

    @property
    def requires_tls(self) -> bool:
        return self.ssl_mode not in (SslMode.PREFERRED, SslMode.DISABLED)

    def pymysql_args(self) -> dict:
        """Keywords for pymysql.connect, also the replication connection's settings. A plain dict of plain values."""
        args: dict = {}
        if self.ssl_mode == SslMode.DISABLED:
            args["ssl_disabled"] = True
        elif self.requires_tls:
            # A non-empty `ssl` makes PyMySQL 1.2 refuse a server without TLS instead of falling back.
            args["ssl"] = {"verify_mode": self.verifies, "check_hostname": self.ssl_mode == SslMode.VERIFY_IDENTITY,
                           **({"ca": self.ssl_ca} if self.ssl_ca else {})}
        if self.server_public_key_path:
            args["server_public_key"] = _read_key(self.server_public_key_path)
        return args

    def jdbc_properties(self) -> tuple[tuple[str, str], ...]:
        """Connector/J 2.7 connection properties (its DefaultOptions), passed as properties rather than in the URL,
        so that a path needs no escaping."""
        props: list[tuple[str, str]] = []
        if self.requires_tls:
            props.append(("useSsl", "true"))
            if self.verifies:
                props.append(("serverSslCert", self.ssl_ca))
                if self.ssl_mode == SslMode.VERIFY_CA:
                    props.append(("disableSslHostnameVerification", "true"))
            else:
                props.append(("trustServerCertificate", "true"))
        elif self.server_public_key_path:
            props.append(("serverRsaPublicKeyFile", self.server_public_key_path))
        else:
            # Full caching_sha2_password authentication over plain TCP: fetch the key, as PyMySQL does.
            props.append(("allowPublicKeyRetrieval", "true"))
        return tuple(props)


def _read_key(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read server-public-key-path {path}: {exc.strerror}",
                          "copy the server's public_key.pem (SHOW VARIABLES LIKE 'caching_sha2_password_public_key_path') "
                          "there, or drop the parameter to let the clients ask the server for it") from None


# ---- refusals -----------------------------------------------------------------------------------------------

_ACCESS_DENIED = ("access denied", "using password")
_KEY_EXCHANGE = ("rsa public key", "public key retrieval", "caching sha2", "caching_sha2", "sha256",
                 "requires secure connection", "serverrsapublickeyfile")
_TLS = ("[ssl", "ssl is required", "ssl not enabled", "sslhandshake", "ssl connection", "certificate", "pkix")

ACCESS_HINT = "check the user and password in the URL, and that the user may log in from this host"
KEY_HINT = ("the account logs in with caching_sha2_password, whose full authentication needs TLS or the server's RSA "
            "key: add ?ssl-mode=REQUIRED to the URL, or give the key with ?server-public-key-path=/path/public_key.pem "
            "(or drop that parameter to let the clients fetch it)")
TLS_HINT = ("check ssl-mode and ssl-ca in the URL: the server must have TLS on, ssl-ca must be the CA that signed its "
            "certificate (VERIFY_CA), whose name must match the URL's host (VERIFY_IDENTITY)")


def refusal_hint(reason: str) -> str | None:
    """The way out when `reason` (a driver's message) says the server or the TLS layer refused the login; None when
    it says nothing answered."""
    text = reason.lower()
    for keys, hint in ((_ACCESS_DENIED, ACCESS_HINT), (_KEY_EXCHANGE, KEY_HINT), (_TLS, TLS_HINT)):
        if any(k in text for k in keys):
            return hint
    return None


def refused(connection: str, url: DbUrl | str, reason: str, password: str = "") -> LoginError | UnreachableError:
    """`connection` (PYMYSQL, REPLICATION or SPARK_JDBC) to `url` (masked when a string) failed for `reason`: a
    LoginError when the server or the TLS layer refused us, an UnreachableError when nothing answered. The password
    is masked even if the driver echoed it."""
    password = password or (url.password if isinstance(url, DbUrl) else "")
    reason = scrub(reason, password)
    message = f"cannot connect to {url} over {connection}: {reason.strip()}"
    hint = refusal_hint(reason)
    return UnreachableError(message, NETWORK_HINT) if hint is None else LoginError(message, hint)
