"""A config file's text on its way to the models: `${VAR}` expansion, and what a config error may show of the
file, never a credential.

A YAML error names the file, line, column and the kind of error, not the parser's excerpt of the line (which is
where a password written into the file would be). Every other config error (pydantic's, an unset `${VAR}`, a URL
that does not parse) has each credential of the file masked: URL passwords, the values of keys that name a secret
(`password:`, `*_token:`...), and the values that `${VAR}` put in, whatever their key. Errors raised while loading
pass through `redacted` once, so the CLI, the code location's metadata and its sensors show the same safe text.
"""
from __future__ import annotations

import os
import re

import yaml

from cdc_assets.core.urls import mask
from pydantic import ValidationError

from cdc_assets.errors import MASK, ConfigError

SECRET_KEY = re.compile(r"pass(word|wd|phrase)?$|secret|token|api_?key|credential|private_?key|auth$", re.I)
_KEY_LINE = re.compile(r"""^[\s-]*["']?([\w.-]+)["']?\s*:\s*(.+?)\s*$""")
_URL_PASSWORD = re.compile(r"""[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s'"]*:([^\s'"]+)@""")  # to the last @, as URLs read
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
SHORTEST = 3  # shorter values are left to the URL rule: masking every "on" in a message would garble it


def yaml_error(file: object, exc: yaml.YAMLError) -> ConfigError:
    """`exc` as where and what, without the parser's excerpt of the file."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return ConfigError(f"config file {file} is not valid YAML ({type(exc).__name__})",
                           "check the file's encoding and characters")
    parts = [f"{text}{_at(mark)}" for text, mark in ((exc.context, exc.context_mark), (exc.problem, exc.problem_mark))
             if text]
    return ConfigError(f"config file {file} is not valid YAML: " + "; ".join(parts),
                       "fix the file at that line (indentation with spaces, quotes closed, `key: value`)")


def _at(mark) -> str:
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def secrets_in_text(text: str) -> set[str]:
    """The credentials a config file's text holds, found line by line (it need not parse)."""
    found: set[str] = set()
    for line in text.splitlines():
        match = _KEY_LINE.match(line)
        if match and SECRET_KEY.search(match.group(1)):
            found.add(match.group(2).strip("'\""))
        found.update(m.group(1) for m in _URL_PASSWORD.finditer(line))
    return _literal(found) | _variable_values(_VAR.findall(text))


def secrets_in_raw(raw: object) -> set[str]:
    """The credentials a config already read into dicts and lists holds."""
    found: set[str] = set()
    names: list[str] = []

    def walk(value, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str):
            if SECRET_KEY.search(key):
                found.add(value)
            found.update(m.group(1) for m in _URL_PASSWORD.finditer(value))
            names.extend(_VAR.findall(value))

    walk(raw, "")
    return _literal(found) | _variable_values(names)


def _literal(values: set[str]) -> set[str]:
    """A `${VAR}` written in the file is its name, which errors show (`_variable_values` masks its value)."""
    return {v for v in values if "${" not in v}


def _variable_values(names: list[str]) -> set[str]:
    return {os.environ[name] for name in names if name in os.environ}


def redact(text: str, secrets: set[str]) -> str:
    """`text` with every secret (and its percent-decoded form) masked, then any URL password left."""
    from urllib.parse import unquote

    every = {s for secret in secrets for s in (secret, unquote(secret))}
    for secret in sorted((s for s in every if len(s) >= SHORTEST and s != MASK), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return mask(text)


def redacted(exc: ConfigError, secrets: set[str]) -> ConfigError:
    return ConfigError(redact(exc.message, secrets), redact(exc.hint, secrets))


def expand(value, key: str):
    """`value` with each `${VAR}` in its strings replaced from the environment; `key` names where, for errors."""
    if isinstance(value, dict):
        return {k: expand(v, f"{key}.{k}" if key else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, f"{key}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str):
        def sub(match: re.Match) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise ConfigError(f"{key} refers to ${{{name}}}, which is not set", f"export {name}=... before running")
            return os.environ[name]

        return _VAR.sub(sub, value)
    return value


def describe(exc: ValidationError) -> str:
    """pydantic's errors by key, without the input values pydantic would show."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "config"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        # Never echo an input value: it may be a URL with a password in it.
        lines.append(f"{where}: {mask(msg)}")
    return "invalid config: " + "; ".join(lines)
