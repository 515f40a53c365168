"""``fuzzball admin monitoring issue-cert``: a client certificate from Orchestrate's
monitoring CA, for an Alertmanager of the site's own to present to Orchestrate's hold
receiver (mTLS on ``monitoring.webhook-listen``). Needs a cluster administrator's context."""

from __future__ import annotations

from pathlib import Path

import click

from fuzzball_core.cli.context import CliState
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.store.private_files import open_private


@click.group()
def monitoring() -> None:
    """The monitoring stack's credentials."""


@monitoring.command("issue-cert")
@click.argument("name")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Directory for NAME.crt, NAME.key (0600) and ca.crt.",
)
@click.pass_obj
def issue_cert(state: CliState, name: str, out_dir: Path) -> None:
    """Issue client certificate NAME for an external Alertmanager.

    Put the three files in the Alertmanager's webhook_configs http_config.tls_config
    (cert_file, key_file, ca_file) of the fuzzball-holds receiver (docs/monitoring.md)."""
    issued = state.api.call_json("POST", "/monitoring/client-certificates", body={"name": name})
    if not isinstance(issued, dict) or not all(k in issued for k in ("certificate", "key", "ca")):
        raise InvalidArgument("the server's answer holds no certificate")
    out_dir.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    with open_private(out_dir / f"{safe}.key") as key:
        key.write(issued["key"].encode())
    (out_dir / f"{safe}.crt").write_text(issued["certificate"])
    (out_dir / "ca.crt").write_text(issued["ca"])
    click.echo(
        f"wrote {out_dir / f'{safe}.crt'}, {out_dir / f'{safe}.key'} and {out_dir / 'ca.crt'}"
    )
