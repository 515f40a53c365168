"""The shared configuration file: defaults, validation and errors that name the key."""

import re
from pathlib import Path

import pytest

from fuzzball_core.config import (
    ConfigError,
    FuzzballConfig,
    load_config,
    parse_config,
    split_listen,
)


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


@pytest.mark.parametrize(("key", "value"), [("memory", 0), ("node-name", ""), ("cores", 0)])
def test_a_nodes_empty_name_or_resources_are_refused_not_taken_for_the_machines(key, value):
    # left out, each is the machine's own; given empty, it is a mistake to name
    with pytest.raises(ConfigError, match=rf"substrate\.{key}"):
        parse_config({"substrate": {key: value}})


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


def test_on_and_off_are_keys_not_booleans(tmp_path):
    path = write(tmp_path, "orchestrate:\n  default-retry: {on: [node], attempts: 2}\n")
    retry = load_config(path).orchestrate.default_retry
    assert retry is not None and retry.on == ["node"] and retry.attempts == 2


def test_a_key_written_twice_is_refused_naming_it_and_its_line(tmp_path):
    path = write(tmp_path, "scheduler:\n  driver: a\nscheduler:\n  driver: b\n")
    with pytest.raises(ConfigError, match=r"line 3, column 1: duplicate key 'scheduler'"):
        load_config(path)


@pytest.mark.parametrize(
    ("section", "listen"),
    [
        ({"orchestrate": {"rest-listen": "nonsense"}}, "orchestrate.rest-listen"),
        ({"orchestrate": {"grpc-listen": "127.0.0.1:99999"}}, "orchestrate.grpc-listen"),
        ({"orchestrate": {"endpoints": {"listen": "0.0.0.0:70000"}}}, "endpoints.listen"),
        ({"substrate": {"metrics-listen": "1.2.3.4"}}, "substrate.metrics-listen"),
        ({"federate": {"listen": "::1:8090"}}, "federate.listen"),
    ],
)
def test_a_listen_address_that_is_no_host_and_port_is_refused_naming_it(section, listen):
    with pytest.raises(ConfigError, match=rf"{re.escape(listen)}: (expected host:port|an IPv6)"):
        parse_config(section)


def test_an_ipv6_listen_address_is_written_in_brackets():
    assert split_listen(
        parse_config({"orchestrate": {"rest-listen": "[::1]:8080"}}).orchestrate.rest_listen
    ) == ("::1", 8080)


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"orchestrate": {"node-keepalive": {"interval": "600h"}}}, "node-keepalive.interval"),
        ({"monitoring": {"scrape-interval": float("inf")}}, "monitoring.scrape-interval"),
        ({"images": {"cache-max-bytes": 0}}, "images.cache-max-bytes"),
        ({"images": {"registries": {"docker.io": {"mirrors": ["ftp://m"]}}}}, "mirrors[0]"),
        ({"substrate": {"devices": {"nvidia.com/gpu": -1}}}, "substrate.devices"),
        ({"database": {"url": "bogus://"}}, "database.url"),
        ({"orchestrate": {"max-eviction-restarts": True}}, "max-eviction-restarts"),
    ],
)
def test_a_value_its_consumer_cannot_use_is_refused_naming_the_key(section, key):
    with pytest.raises(ConfigError, match=re.escape(key)):
        parse_config(section)


@pytest.mark.parametrize(
    ("timing", "why"),
    [
        ({"ttl-buffer": 20}, "needs a ttl"),
        ({"ttl": 10, "ttl-buffer": 20}, "must be shorter than ttl"),
    ],
)
def test_a_ttl_buffer_without_room_before_the_ttl_is_refused(timing, why):
    definition = {"id": "a", "driver": "local", "cores": 1, "memory": "1GiB", **timing}
    with pytest.raises(ConfigError, match=rf"provisioner\.definitions\[0\]: ttl-buffer {why}"):
        parse_config({"provisioner": {"definitions": [definition]}})


def test_a_failover_grace_of_zero_fails_over_at_once():
    assert parse_config({"federate": {"failover-grace": 0}}).federate.failover_grace == 0


def test_a_trusted_federates_key_file_unreadable_or_not_a_key_is_refused_naming_it(tmp_path):
    from fuzzball_core.service.forwarded_identity import TrustedFederates

    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key")
    with pytest.raises(ConfigError, match=r"orchestrate\.trusted-federates\.hq: cannot read"):
        TrustedFederates.from_files({"hq": tmp_path / "absent.pem"})
    with pytest.raises(ConfigError, match=r"trusted-federates\.hq: .* holds no Ed25519"):
        TrustedFederates.from_files({"hq": garbage})
