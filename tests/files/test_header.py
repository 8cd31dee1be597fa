"""``check_header``: every file's ``format`` and ``version`` refused in the same words."""

from __future__ import annotations

import pytest

from tensorcode import files
from tensorcode.errors import ArtifactError

FORMAT = "tensorcode.example"


def _refusal(document, versions=1, **options) -> ArtifactError:
    with pytest.raises(ArtifactError) as caught:
        files.check_header(document, FORMAT, versions, "dir/file.json", **options)
    return caught.value


def test_a_matching_header_returns_the_version_read():
    assert files.check_header({"format": FORMAT, "version": 1}, FORMAT, 1) == 1
    assert files.check_header({"format": FORMAT, "version": 2}, FORMAT, (1, 2)) == 2
    assert files.check_header({"format": FORMAT}, FORMAT, None) is None


def test_a_wrong_format_names_the_field_what_was_found_and_what_is_read():
    error = _refusal({"format": "tensorcode.other", "version": 1},
                     hint="write it with `tensorcode make`")
    assert (error.path, error.field) == ("dir/file.json", "format")
    assert str(error) == ("dir/file.json: field 'format': expected 'tensorcode.example', "
                          "found the text 'tensorcode.other'; this is not a "
                          "tensorcode.example file; write it with `tensorcode make`")
    assert _refusal({"version": 1}).field == "format"
    assert "found the number 3" in str(_refusal({"format": 3, "version": 1}))
    assert _refusal(["not", "an", "object"]).field == "(top level)"


def test_a_newer_version_says_to_upgrade():
    error = _refusal({"format": FORMAT, "version": 3}, versions=(1, 2))
    assert error.field == "version"
    assert str(error) == ("dir/file.json: field 'version': found version 3, newer than this "
                          "TensorCode reads (versions 1, 2); upgrade TensorCode to read "
                          "this file")


def test_an_older_version_gets_the_loaders_advice():
    error = _refusal({"format": FORMAT, "version": 1}, versions=2, older="save it again")
    assert str(error).endswith("found version 1, but this TensorCode reads version 2; "
                               "save it again")
    # a version between the accepted ones is neither newer nor older
    middle = _refusal({"format": FORMAT, "version": 2}, versions=(1, 3), older="unused")
    assert "unused" not in str(middle) and "upgrade" not in str(middle)


@pytest.mark.parametrize("version", [True, "1", 1.0, None])
def test_a_version_must_be_an_integer(version):
    error = _refusal({"format": FORMAT, "version": version})
    assert error.field == "version" and "expected an integer version" in str(error)


def test_a_missing_version_is_refused_and_a_nested_header_names_its_path():
    assert "is missing" in str(_refusal({"format": FORMAT}))
    error = _refusal({"format": FORMAT, "version": 9}, prefix="index")
    assert error.field == "index.version"
