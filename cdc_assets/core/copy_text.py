"""PostgreSQL's COPY text format (PostgreSQL 15 docs, "COPY", "Text Format"): columns separated by a tab, NULL as
`\\N`, and a backslash, newline, carriage return or tab inside a value written as `\\\\`, `\\n`, `\\r`, `\\t`.
Shared by whoever renders COPY lines in Python: a MongoDB source's export, a PostgreSQL target's log batches."""
from __future__ import annotations

NULL = r"\N"
SEPARATOR = "\t"
SPECIAL = "\\\n\r\t"  # the characters `escape` rewrites
_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def escape(text: str) -> str:
    """`text` as one COPY field; most values hold nothing to escape and are returned as they are."""
    if "\\" in text or "\n" in text or "\r" in text or "\t" in text:
        return text.translate(_ESCAPES)
    return text
