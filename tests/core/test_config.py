"""The shared configuration file: defaults, validation and errors that name the key."""

from pathlib import Path

import pytest

from fuzzball_core.config import ConfigError, FuzzballConfig, load_config, parse_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_no_file_gives_the_embedded_defaults(monkeypatch):
    monkeypatch.delenv("FUZZBALL_CONFIG", raising=False)
    config = load_config()
    assert config.scheduler.driver == "default"
    assert config.database_url.startswith("sqlite:///")
    assert config.database_url.endswith("orchestrate.db")
    assert config.orchestrate.rest_listen.startswith("127.0.0.1:")


def test_environment_variable_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("FUZZBALL_CONFIG", str(write(tmp_path, "scheduler: {driver: mine}\n")))
    assert load_config().scheduler.driver == "mine"


def test_explicit_path_wins_over_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FUZZBALL_CONFIG", "/nonexistent.yaml")
    path = write(tmp_path, "scheduler: {driver: explicit}\n")
    assert load_config(path).scheduler.driver == "explicit"


def test_hyphenated_keys_and_sizes_are_read(tmp_path):
    config = load_config(
        write(
            tmp_path,
            "images:\n"
            "  registries:\n"
            "    docker.io:\n"
            "      mirrors: ['http://127.0.0.1:5000']\n"
            "  cache-max-bytes: 20GiB\n"
            "  cache-write-back: true\n",
        )
    )
    assert config.images.cache_max_bytes == 20 * 1024**3
    assert config.images.cache_write_back is True
    assert config.images.registries["docker.io"].mirrors == ["http://127.0.0.1:5000"]


def test_unknown_key_is_named_with_its_path():
    with pytest.raises(ConfigError, match=r"scheduler\.drivr: unknown key"):
        parse_config({"scheduler": {"drivr": "default"}})


def test_wrong_type_is_named_with_its_path():
    with pytest.raises(ConfigError, match=r"orchestrate\.max-eviction-restarts"):
        parse_config({"orchestrate": {"max-eviction-restarts": "many"}})


def test_bad_size_names_the_key_and_the_units():
    with pytest.raises(ConfigError, match=r"images\.cache-max-bytes.*512MiB"):
        parse_config({"images": {"cache-max-bytes": "lots"}})


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as excinfo:
        parse_config({"nope": 1, "scheduler": {"driver": 5}})
    assert "nope: unknown key" in excinfo.value.message
    assert "scheduler.driver" in excinfo.value.message
    assert len(excinfo.value.details) == 2


def test_top_level_must_be_a_mapping():
    with pytest.raises(ConfigError, match="must be a mapping"):
        parse_config(["a", "b"])


def test_invalid_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "scheduler:\n  driver: [unclosed\n")
    with pytest.raises(ConfigError, match=r"config\.yaml: line \d+"):
        load_config(path)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot read configuration .*No such file"):
        load_config(tmp_path / "absent.yaml")


def test_empty_file_gives_defaults(tmp_path):
    assert load_config(write(tmp_path, "")) == FuzzballConfig()


def test_durations_read_like_workflow_durations():
    assert parse_config({"orchestrate": {"node-lease": "1m30s"}}).orchestrate.node_lease == 90


def test_bad_duration_names_the_key():
    with pytest.raises(ConfigError, match=r"orchestrate\.node-lease"):
        parse_config({"orchestrate": {"node-lease": "10x"}})


def test_the_engine_pass_budget_defaults_to_a_tenth_of_a_second():
    assert parse_config({}).orchestrate.pass_budget == 0.1


def test_a_pass_budget_that_is_not_positive_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"orchestrate\.pass-budget"):
        parse_config({"orchestrate": {"pass-budget": 0}})
