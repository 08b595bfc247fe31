"""The environment switches read one way."""

import pytest

from roofline.config.switches import switched_on


@pytest.mark.parametrize("value", ["on", "ON", "1", "yes", "true", " True "])
def test_on_spellings(value):
    assert switched_on("X", False, {"X": value}) is True


@pytest.mark.parametrize("value", ["off", "Off", "0", "no", "false"])
def test_off_spellings(value):
    assert switched_on("X", True, {"X": value}) is False


@pytest.mark.parametrize("value", [None, "", "maybe", "2"])
def test_unset_or_unreadable_is_the_default(value):
    environ = {} if value is None else {"X": value}
    assert switched_on("X", True, environ) is True and switched_on("X", False, environ) is False
