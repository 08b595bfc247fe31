"""roofline.jobs.arguments: a rule's JSON value inline when short, else a file named by its digest."""

import json
from pathlib import Path

import pytest

from roofline.jobs.arguments import json_argument, read_json_argument


def test_a_long_json_value_goes_through_a_file_named_by_its_digest(tmp_path):
    short = json.dumps({"app": "a.ncu-rep"})
    assert json_argument(short, str(tmp_path)) == short
    assert read_json_argument(short) == {"app": "a.ncu-rep"}
    value = {f"app_{i}": f"inputs/app_{i}.ncu-rep" for i in range(2000)}
    argument = json_argument(json.dumps(value), str(tmp_path))
    assert argument.startswith(f"@{tmp_path}/") and len(argument) < 200
    assert read_json_argument(argument) == value
    assert json_argument(json.dumps(value), str(tmp_path)) == argument  # the same value, the same file
    value["app_0"] = "elsewhere.ncu-rep"
    assert json_argument(json.dumps(value), str(tmp_path)) != argument  # changed: a new argument, a rerun
    Path(argument[1:]).unlink()
    with pytest.raises(ValueError, match="argument file .* cannot be read .*rerun the workflow"):
        read_json_argument(argument)
