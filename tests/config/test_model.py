"""Config: one pydantic model, its exported JSON Schema in sync, clear errors for bad keys and names."""

import json

import pytest
import yaml
from conftest import REPO

from roofline.config import workflow
from roofline.config.model import SCHEMA_PATH, ConfigError, load_config
from roofline.config.workflow import input_kind, resolve_apps, resolve_inputs


def test_exported_schema_is_up_to_date():
    from roofline.config.model import json_schema

    on_disk = json.loads(SCHEMA_PATH.read_text())
    assert on_disk == json_schema(), "run `python -m roofline.config.model` to re-export the schema"


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


@pytest.mark.parametrize("file, app", [("has space.ncu-rep", "has_space"), ("ünïcode.ncu-rep", "unicode"),
                                       ("semi;colon.ncu-rep", "semi_colon"), ("run.csv.gz", "run")])
def test_any_file_name_gives_an_app_name(tmp_path, file, app):
    (tmp_path / file).write_text("hand-made placeholder")
    apps = resolve_apps(load_config({"inputs": ["*"]}), tmp_path)
    assert list(apps) == [app] and apps[app].source == file


def test_explicit_app_names_are_still_checked_strictly():
    for name in ("../evil", "a/b", "..", "my app", "ünï"):
        with pytest.raises(ConfigError, match="may use only letters"):
            resolve_apps(load_config({"apps": {name: {"command": "x"}}}))


def test_app_names_cannot_escape_data_dir():
    for name in ("../evil", "a/b", ".."):
        with pytest.raises(ConfigError):
            resolve_apps(load_config({"apps": {name: {"command": "x"}}}))


def test_two_inputs_of_one_name_get_suffixes_in_path_order(tmp_path):
    for folder, file in (("b", "gemm.csv"), ("a", "gemm.ncu-rep"), ("c", "gemm.yaml")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / file).write_text("x")
    for patterns in (["a/*", "b/*", "c/*"], ["c/*", "b/*", "a/*"]):
        apps = resolve_apps(load_config({"inputs": patterns}), tmp_path)
        assert {n: a.source for n, a in apps.items()} == {"gemm": "a/gemm.ncu-rep", "gemm-2": "b/gemm.csv",
                                                         "gemm-3": "c/gemm.yaml"}


def test_an_apps_name_wins_over_a_file_of_that_name(tmp_path):
    (tmp_path / "gemm.yaml").write_text("x")
    apps = resolve_apps(load_config({"inputs": ["*.yaml"], "apps": {"gemm": {"command": "./gemm"}}}), tmp_path)
    assert (apps["gemm"].kind, apps["gemm-2"].source) == ("capture", "gemm.yaml")


def test_a_missing_input_is_an_input_problem_not_a_config_error(tmp_path):
    apps, problems = resolve_inputs(load_config({"inputs": ["nope.ncu-rep", "none/*.csv"]}), tmp_path)
    assert apps == {}
    assert [p.pattern for p in problems] == ["nope.ncu-rep", "none/*.csv"]
    assert "'nope.ncu-rep' does not exist" in problems[0].problem
    assert "the folder 'none' does not exist" in problems[1].problem


def test_a_missing_apps_report_still_stops_the_run(tmp_path):
    with pytest.raises(ConfigError, match="apps.gemm.report: 'gone.ncu-rep' does not exist"):
        resolve_apps(load_config({"apps": {"gemm": {"report": "gone.ncu-rep"}}}), tmp_path)


@pytest.mark.parametrize("name, kind", [
    ("x.csv.gz", "csv"), ("x.csv.xz", "csv"), ("x.CSV.ZST", "csv"), ("x.csv.zstd", "csv"), ("x.csv.bz2", "csv"),
    ("x.yaml.gz", "what-if"), ("x.yml.gz", "what-if"), ("x.yml.xz", "what-if"), ("x.ncu-rep.gz", "ncu-rep"),
])
def test_compressed_inputs_keep_their_kind(tmp_path, name, kind):
    assert input_kind(str(tmp_path / name)) == kind
    (tmp_path / name).write_text("hand-made placeholder")
    assert [a.kind for a in resolve_apps(load_config({"inputs": ["*"]}), tmp_path).values()] == [kind]


def test_an_apps_report_of_unknown_type_stops_the_run(tmp_path):
    (tmp_path / "notes.txt").write_text("hand-made")
    with pytest.raises(ConfigError, match="unknown file type"):
        resolve_apps(load_config({"apps": {"notes": {"report": "notes.txt"}}}), tmp_path)


def test_annotation_regex_is_checked():
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        load_config({"classify": {"annotations": [{"kernel": "gemm<(", "algorithmic_flop": 1}]}})


def test_a_key_given_twice_in_a_config_file_is_refused_by_either_parser(tmp_path, monkeypatch):
    path = tmp_path / "config.yaml"
    path.write_text("apps:\n  gemm: {report: a.ncu-rep}\n  other: {report: b.ncu-rep}\n  gemm: {report: c.ncu-rep}\n")
    with pytest.raises(ConfigError, match=r"config\.yaml: line 4: key 'gemm' is given twice \(first on line 2\)"):
        workflow.check_config_files([path])
    # where libyaml refuses the text, the pure-Python parser (Snakemake's) still finds the key
    monkeypatch.setattr(workflow, "FastStrictLoader", _Refusing)
    with pytest.raises(ConfigError, match="line 4: key 'gemm' is given twice"):
        workflow.check_config_files([path])
    path.write_text("apps:\n  gemm: {report: a.ncu-rep}\n")
    workflow.check_config_files([path])  # no error


class _Refusing(yaml.SafeLoader):
    def get_single_data(self):
        raise yaml.YAMLError("refused")


def test_the_configs_kernels_drawn_first_default_is_the_charts():
    """report.top_kernels' default (config.py stays free of Altair) is the count a chart built
    without the config draws first (roofline.charts.roofline_chart.TOP_N_DEFAULT: the CLI's pages, api.plot)."""
    from roofline.charts.roofline_chart import TOP_N_DEFAULT
    from roofline.config.model import ReportConfig

    assert ReportConfig().top_kernels == TOP_N_DEFAULT
