"""What Spark needs to reach a database over JDBC. The password stays out of the URL and of repr()."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class JdbcEndpoint:
    url: str  # no credentials in it: Spark prints JDBC URLs in errors
    driver: str
    user: str
    password: str = field(repr=False)
    options: tuple[tuple[str, str], ...] = ()  # extra reader/writer options, e.g. sessionInitStatement
    name: str = ""  # the masked URL it was built from, for messages

    def properties(self) -> dict[str, str]:
        return {"driver": self.driver, "user": self.user, "password": self.password, **dict(self.options)}
