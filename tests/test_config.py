"""Config: one pydantic model, its exported JSON Schema in sync, clear errors for bad keys and names."""

import json

import pytest
from conftest import REPO

from roofline.config import SCHEMA_PATH, ConfigError, load_config, resolve_apps


def test_exported_schema_is_up_to_date():
    from roofline.config import json_schema

    on_disk = json.loads(SCHEMA_PATH.read_text())
    assert on_disk == json_schema(), "run `python -m roofline.config` to re-export the schema"


def test_default_config_file_validates():
    import yaml

    config = load_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    assert config.ceilings.policy == ["report", "datasheet"]


def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match="unknown config key 'ceilings.polcy'"):
        load_config({"ceilings": {"polcy": ["report"]}})
    with pytest.raises(ConfigError, match="unknown config key 'input'"):
        load_config({"input": ["x"]})


def test_wrong_type_is_named():
    with pytest.raises(ConfigError, match="config key 'classify.low_roof_fraction'"):
        load_config({"classify": {"low_roof_fraction": "lots"}})


def test_app_needs_report_or_command_not_both():
    with pytest.raises(ConfigError, match="exactly one of 'report'"):
        load_config({"apps": {"a": {"report": "x.ncu-rep", "command": "./a.out"}}})


def test_apps_from_inputs_and_names(tmp_path):
    (tmp_path / "in").mkdir()
    for name in ("one.ncu-rep", "two.csv", "three.yaml"):
        (tmp_path / "in" / name).write_text("hand-made placeholder")
    config = load_config({"inputs": ["in/*"], "apps": {"gemm": {"command": "./gemm"}}})
    apps = resolve_apps(config, tmp_path)
    assert {a: (apps[a].kind) for a in apps} == {"one": "ncu-rep", "two": "csv", "three": "what-if", "gemm": "capture"}


@pytest.mark.parametrize("bad", ["has space.ncu-rep", "ünïcode.ncu-rep", "semi;colon.ncu-rep"])
def test_bad_app_names_are_refused(tmp_path, bad):
    (tmp_path / bad).write_text("hand-made placeholder")
    with pytest.raises(ConfigError, match="may use only letters"):
        resolve_apps(load_config({"inputs": ["*"]}), tmp_path)


def test_app_names_cannot_escape_data_dir():
    for name in ("../evil", "a/b", ".."):
        with pytest.raises(ConfigError):
            resolve_apps(load_config({"apps": {name: {"command": "x"}}}))


def test_duplicate_app_names_are_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "gemm.ncu-rep").write_text("x")
    (tmp_path / "b" / "gemm.csv").write_text("x")
    with pytest.raises(ConfigError, match="two inputs give the app name 'gemm'"):
        resolve_apps(load_config({"inputs": ["a/*", "b/*"]}), tmp_path)


def test_missing_input_is_named(tmp_path):
    with pytest.raises(ConfigError, match="'nope.ncu-rep' does not exist"):
        resolve_apps(load_config({"inputs": ["nope.ncu-rep"]}), tmp_path)


def test_annotation_regex_is_checked():
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        load_config({"classify": {"annotations": [{"kernel": "gemm<(", "algorithmic_flop": 1}]}})
