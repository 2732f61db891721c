"""The COPY text a PostgreSQL staging write sends for a batch of COPY lines, cut from the Arrow buffers."""
import pyarrow as pa
import pytest

from cdc_assets.spark.staging import copy_payload


def test_each_line_ends_with_a_newline_in_utf8():
    assert copy_payload(pa.array(["1\tab", "2\tcé\\n", "3\t"])) == "1\tab\n2\tcé\\n\n3\t\n".encode()


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()])
def test_a_slice_of_any_string_or_binary_array_gives_its_own_lines(kind):
    lines = pa.array([b"0\tx", b"1\ty", b"2\tz", b"3\tw"] if pa.types.is_binary(kind) or
                     pa.types.is_large_binary(kind) else ["0\tx", "1\ty", "2\tz", "3\tw"], kind)
    assert copy_payload(lines.slice(1, 2)) == b"1\ty\n2\tz\n"


def test_a_null_line_is_refused_not_skipped():
    with pytest.raises(ValueError, match="NULL"):
        copy_payload(pa.array(["1\ta", None]))
