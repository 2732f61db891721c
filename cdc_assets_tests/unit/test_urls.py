"""DbUrl: SQLAlchemy's URL grammar for the relational schemes, our own minimal one for MongoDB seed lists."""
from __future__ import annotations

import pytest

from cdc_assets.core.urls import DbUrl, mask
from cdc_assets.dbapi.mysql_login import MysqlLogin, SslMode
from cdc_assets.errors import ConfigError

SECRET = "p/:@%# w?&="  # every character with a meaning in a URL


def test_special_characters_in_user_and_password_round_trip_percent_encoded():
    url = DbUrl("postgres", "db.example", 5433, user="app:ro@x", password=SECRET, database="shop")
    rendered = url.render(masked=False)
    assert "p/:@%# w?&=" not in rendered  # percent-encoded, not written raw
    assert DbUrl.parse(rendered) == url
    assert "p/" not in str(url) and SECRET not in repr(url) and str(url).startswith("postgresql://app%3Aro%40x:***@")


@pytest.mark.parametrize("raw, expected", [
    ("mysql://cdc:pw-SECRET@h:abc/shop", "invalid port"),
    ("mysql://cdc:pw-SECRET@h:70000/shop", "port 70000 out of range"),
    ("oracle://cdc:pw-SECRET@h/shop", "unsupported scheme 'oracle://'"),
    ("mongodb+srv://cdc:pw-SECRET@cluster.example/", "unsupported scheme 'mongodb+srv://'"),
    ("mysql://cdc:pw@SECRET@h/shop", "percent-encode '@'"),  # SQLAlchemy would take 'SECRET@h' as the host
    ("cdc:pw-SECRET@h/shop", "is not a database URL"),
    ("mongodb://cdc:pw-SECRET@h1:27017,h2:x/", "invalid port"),
])
def test_bad_urls_are_config_errors_naming_the_key_never_the_password(raw, expected):
    with pytest.raises(ConfigError) as err:
        DbUrl.parse(raw, "source.url")
    text = str(err.value)
    assert text.startswith("source.url") and expected in text and "SECRET" not in text
    assert err.value.__cause__ is None and (err.value.__context__ is None or err.value.__suppress_context__)


def test_query_parameters_are_kept_sorted_with_repeated_values_and_read_by_the_mysql_login():
    url = DbUrl.parse("mariadb://cdc:pw@h/shop?ssl-mode=VERIFY_CA&ssl-ca=/etc/ca%20dir/ca.pem&ssl-mode=REQUIRED")
    assert url.db_type == "mysql" and url.port == 3306
    assert url.params == (("ssl-ca", "/etc/ca dir/ca.pem"), ("ssl-mode", "VERIFY_CA"), ("ssl-mode", "REQUIRED"))
    assert DbUrl.parse(url.render(masked=False)) == url
    login = MysqlLogin.from_url(url)  # the last repeated value wins, as a dict reads it
    assert login.ssl_mode is SslMode.REQUIRED and login.ssl_ca == "/etc/ca dir/ca.pem"


def test_defaults_and_a_driver_suffix_are_canonical():
    assert DbUrl.parse("postgres://u@[::1]/d") == DbUrl("postgres", "::1", 5432, "u", "", "d")
    assert DbUrl.parse("mysql+pymysql://u:pw@h/d").render(masked=False) == "mysql://u:pw@h:3306/d"
    assert DbUrl.parse("mysql://h").with_database("shop").render() == "mysql://h:3306/shop"
    assert str(DbUrl.parse("mysql://u:pw@h?ssl-mode=REQUIRED")) == "mysql://u:***@h:3306/?ssl-mode=REQUIRED"


def test_a_mongodb_seed_list_keeps_its_hosts_and_masks_its_password():
    raw = "mongodb://cdc:pw%40SECRET@h1:27017,[::1]:27018/admin?replicaSet=rs0&w=majority"
    url = DbUrl.parse(raw)
    assert (url.db_type, url.host, url.port, url.user, url.password) == ("mongo", "h1", 27017, "cdc", "pw@SECRET")
    assert url.seeds == ("h1:27017", "[::1]:27018") and url.database == "admin"
    assert dict(url.params) == {"replicaSet": "rs0", "w": "majority"}
    assert str(url) == "mongodb://cdc:***@h1:27017,[::1]:27018/admin?replicaSet=rs0&w=majority"
    assert url.render(masked=False) == raw and DbUrl.parse(raw) == url


def test_mask_hides_every_url_password_in_free_text_even_unparsable_ones():
    said = "url mysql://a:p@SECRET@h:x/db is not postgresql://b:SECRET2@h/ nor mongodb://c:S3@h1,h2/"
    assert mask(said) == "url mysql://a:***@h:x/db is not postgresql://b:***@h/ nor mongodb://c:***@h1,h2/"
    assert mask("mysql://a@h/db and no password") == "mysql://a@h/db and no password"
