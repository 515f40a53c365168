"""The contexts file: the real CLI's format, written and read back, other tools' fields kept."""

from __future__ import annotations

import stat

import pytest
import yaml

from fuzzball_core.cli.contexts import ContextsFile, contexts_path
from fuzzball_core.errors import AlreadyExists, InvalidArgument, NotFound

REAL_CLI_FILE = """\
activeContext: lab
contexts:
  - name: lab
    address: api.lab.example.org:443
    oidcServerURL: https://auth.lab.example.org/auth/realms/lab
    auth:
      credentials:
        token: eyJhbGciOi.old
      provider: keycloak
    currentaccountid: 5f0c
    accounts:
      - accountid: 5f0c
        accountalias: my-team
    nextflowPlugin: {enabled: true}
telemetry: false
"""


def test_path_follows_xdg_config_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert contexts_path() == tmp_path / "fuzzball" / "config.yaml"


def test_path_defaults_to_dot_config(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert contexts_path() == tmp_path / ".config" / "fuzzball" / "config.yaml"


def test_a_new_file_has_the_real_cli_shape(tmp_path):
    path = tmp_path / "config.yaml"
    contexts = ContextsFile.load(path)
    contexts.create(
        "lab",
        "api.lab.example.org:443",
        oidc_server_url="https://auth.example.org/realms/lab",
        token="t0k",
    )
    contexts.save()
    assert yaml.safe_load(path.read_text()) == {
        "activeContext": "lab",
        "contexts": [
            {
                "name": "lab",
                "address": "api.lab.example.org:443",
                "oidcServerURL": "https://auth.example.org/realms/lab",
                "auth": {"credentials": {"token": "t0k"}},
                "currentaccountid": "",
                "accounts": [],
            }
        ],
    }
    assert path.read_text().startswith("activeContext: lab\n")


def test_the_file_is_readable_by_its_owner_only(tmp_path):
    path = tmp_path / "config.yaml"
    contexts = ContextsFile.load(path)
    contexts.create("lab", "x:1", token="secret")
    contexts.save()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_real_cli_file_is_read(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(REAL_CLI_FILE)
    active = ContextsFile.load(path).active()
    assert (active.name, active.address, active.token, active.current_account_id) == (
        "lab",
        "api.lab.example.org:443",
        "eyJhbGciOi.old",
        "5f0c",
    )
    assert active.oidc_server_url == "https://auth.lab.example.org/auth/realms/lab"
    assert active.accounts == [{"accountid": "5f0c", "accountalias": "my-team"}]


def test_rewriting_keeps_fields_this_cli_does_not_know(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(REAL_CLI_FILE)
    contexts = ContextsFile.load(path)
    contexts.active().token = "new-token"
    contexts.create("other", "other.example.org:443")
    contexts.use("other")
    contexts.save()
    expected = yaml.safe_load(REAL_CLI_FILE)
    expected["activeContext"] = "other"
    expected["contexts"][0]["auth"]["credentials"]["token"] = "new-token"
    expected["contexts"].append(
        {
            "name": "other",
            "address": "other.example.org:443",
            "oidcServerURL": "",
            "auth": {"credentials": {"token": ""}},
            "currentaccountid": "",
            "accounts": [],
        }
    )
    assert yaml.safe_load(path.read_text()) == expected


def test_creating_a_second_context_keeps_the_active_one(tmp_path):
    contexts = ContextsFile.load(tmp_path / "c.yaml")
    contexts.create("a", "a:1")
    contexts.create("b", "b:1")
    assert contexts.active_name == "a"


def test_a_duplicate_name_is_refused(tmp_path):
    contexts = ContextsFile.load(tmp_path / "c.yaml")
    contexts.create("a", "a:1")
    with pytest.raises(AlreadyExists, match="'a'"):
        contexts.create("a", "b:1")


def test_using_an_unknown_context_lists_the_known_ones(tmp_path):
    contexts = ContextsFile.load(tmp_path / "c.yaml")
    contexts.create("a", "a:1")
    with pytest.raises(NotFound, match=r"'zz'.*known contexts: a"):
        contexts.use("zz")


def test_no_active_context_says_what_to_run(tmp_path):
    with pytest.raises(NotFound, match="fuzzball context create"):
        ContextsFile.load(tmp_path / "absent.yaml").active()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("- a\n- b\n", "must be a mapping"),
        ("contexts: 3\n", "contexts: must be a list"),
        ("contexts: [3]\n", r"contexts\[0\]: must be a mapping"),
        ("contexts: [{name: [1]}]\n", r"contexts\[0\].name: must be a string"),
        ("contexts: [{name: a, accounts: 7}]\n", r"contexts\[0\].accounts: must be a list"),
        (
            "contexts: [{name: a, accounts: [7]}]\n",
            r"contexts\[0\].accounts\[0\]: must be a mapping",
        ),
        (
            "contexts: [{name: a, currentaccountid: {x: 1}}]\n",
            r"contexts\[0\].currentaccountid: must be a string",
        ),
        (
            "contexts: [{name: a, oidcServerURL: 3}]\n",
            r"contexts\[0\].oidcServerURL: must be a string",
        ),
        (
            "contexts: [{name: a}, {name: b}, {name: a}]\n",
            r"contexts\[2\].name: 'a' is already the name of contexts\[0\]",
        ),
        ("contexts: [\n", "not valid YAML"),
    ],
)
def test_a_broken_file_is_an_invalid_argument_naming_the_path(tmp_path, text, words):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(InvalidArgument, match=words) as error:
        ContextsFile.load(path)
    assert str(path) in str(error.value)


def test_a_context_with_empty_optional_fields_is_read(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("contexts:\n- name: a\n  currentaccountid:\n  accounts:\n  oidcServerURL:\n")
    (context,) = ContextsFile.load(path).contexts
    assert (context.current_account_id, context.accounts) == ("", [])


def test_context_list_of_a_file_with_accounts_no_list_is_one_error(fuzzball):
    fuzzball.config_file.parent.mkdir(parents=True)
    fuzzball.config_file.write_text(
        "activeContext: a\ncontexts:\n- name: a\n  address: 127.0.0.1:8080\n  accounts: 7\n"
    )
    result = fuzzball("context", "list")
    assert isinstance(result.exception, InvalidArgument)
    assert str(result.exception) == f"{fuzzball.config_file}: contexts[0].accounts: must be a list"
