"""The ``fuzzball-federate`` process: one API in front of several Orchestrate clusters.

Start-up order: configuration and plugins (the ``federate.router`` driver; refuse to start,
exit 2, if they are wrong), then Federate's own database (migrated with Federate's own Alembic
history, ``migrations/`` here: accounts, tokens and the federated workflows, in tables of its
own, so the database may be Orchestrate's too), then the REST gateway on ``federate.listen``.

Its health is served on the same port without a token: ``/healthz`` (alive) and ``/readyz``
(ready: its store answers and at least one member was reachable at the last poll). A loop
(:func:`~fuzzball_core.health.keep_running`) asks every member for its version every
:data:`MEMBER_POLL` seconds; each member is a condition of its own, listed but not needed,
declared when it joins (at start, or by registration) and removed when it leaves. The same
turn records each member's reachability (its UNREACHABLE status and reason) and lets a
draining member that no longer runs federated workflows leave.

Members are the configured ones (``federate.clusters``) and the registered ones, loaded from
Federate's store at start (``registration.py``); registration adds more while it runs.
"""

from __future__ import annotations

import asyncio
import logging

import click
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fuzzball_core.api.http_errors import RestRunner
from fuzzball_core.api.rest import ExtraRoutes, build_rest_app
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.backoff import Backoff
from fuzzball_core.config import ConfigError, FuzzballConfig, split_listen
from fuzzball_core.console import run_console_script, serve_until_signalled
from fuzzball_core.drivers import Router
from fuzzball_core.health import HEALTH_PATHS, Health, describe, health_routes, keep_running
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.service.account_commands import add_account_commands
from fuzzball_core.service.forwarded_identity import (
    IdentitySigner,
    TrustedFederates,
    load_or_create_key,
    public_key_pem,
)
from fuzzball_core.startup import prepare_process
from fuzzball_core.store.database import (
    connect,
    migrate,
    probe,
    session_factory,
    wait_until_answering,
)
from fuzzball_core.store.private_files import private_directory
from fuzzball_core.store.secret_box import SecretBox
from fuzzball_core.tls import ServingSecurity, serving_security
from fuzzball_core.webui.app import webui_routes
from fuzzball_core.webui.context import WebUi
from fuzzball_federation.clusters_route import ClusterRoutes
from fuzzball_federation.failover import Failover
from fuzzball_federation.members import Member, MemberChange, Members
from fuzzball_federation.models import MIGRATIONS
from fuzzball_federation.registration import Registrations
from fuzzball_federation.service import FederateService

log = logging.getLogger("fuzzball.federate")

#: Seconds between two polls of the members' reachability.
MEMBER_POLL = 10.0
#: Federate's signing key in its data dir (owner-only)
IDENTITY_KEY_FILE = "federate-identity.key"
#: The poll loop's retry after a turn that raised.
POLL_RETRY = Backoff(initial=1.0, factor=2.0, maximum=30.0)
#: Federate's health conditions besides one per member (``cluster NAME``).
MEMBERS, POLLING = "members", "member polling"
#: members that left unreachable whose registration is still to be ended there
ENDS = "registration ends"
#: the failover loop's condition
FAILOVER = "failover"


def database_url(config: FuzzballConfig) -> str:
    """Federate's store: ``database.url``, else SQLite ``federate.db`` in data-dir."""
    return config.database.url or f"sqlite:///{config.data_dir / 'federate.db'}"


def build(
    config: FuzzballConfig, router: Router, registry: PluginRegistry | None = None
) -> FederateService:
    """Migrate Federate's database and wire the service over the configured members."""
    seen: set[str] = set()
    for index, member in enumerate(config.federate.clusters):
        if member.name in seen:
            raise ConfigError(f"federate.clusters[{index}].name: {member.name!r} names two members")
        seen.add(member.name)
    _host_port(config.federate.listen)  # a bad listen address refuses to start, exit 2
    if config.database.url == "":
        private_directory(config.data_dir)
    database = connect(database_url(config))
    wait_until_answering(database, config.database.start_wait, log.warning)
    migrate(database, migrations=MIGRATIONS)
    members = Members.from_config(config.federate.clusters, timeout=config.federate.member_timeout)
    key = identity_key(config)
    service = FederateService(
        session_factory(database),
        members,
        router,
        registry=registry,
        token_lifetime=config.accounts.token_lifetime,
        signer=IdentitySigner(key, config.federate.name),
    )
    service.trusted_federates = TrustedFederates(())
    service.registrations = Registrations(
        service.sessions,
        members,
        SecretBox(config.data_dir),
        timeout=config.federate.member_timeout,
        name=config.federate.name,
        key=key,
        accounts=service.accounts,
        trusted=service.trusted_federates,
    )
    service.registrations.load()
    return service


def registrations_of(service: FederateService) -> Registrations:
    """The registrations :func:`build` gave ``service``."""
    registrations = service.registrations
    if registrations is None:
        raise ConfigError("Federate's service was not built with registrations (main.build)")
    return registrations


def identity_key(config: FuzzballConfig) -> Ed25519PrivateKey:
    """The key Federate signs forwarded identities with, kept owner-only in its data dir
    (made on first start)."""
    private_directory(config.data_dir)
    return load_or_create_key(config.data_dir / IDENTITY_KEY_FILE)


def build_app(service: FederateService, health: Health | None = None) -> web.Application:
    """Orchestrate's REST gateway over ``service``, plus ``GET /v3/clusters``, the Web UI
    at ``/`` (:func:`web_ui`), and ``/healthz`` and ``/readyz`` over ``health`` when given."""
    extra = []
    if health is not None:
        add_health = health_routes(health)
        extra.append(ExtraRoutes(add=lambda app, *_: add_health(app), public_paths=HEALTH_PATHS))
    clusters = ClusterRoutes(service, registrations_of(service))
    extra.append(ExtraRoutes(add=lambda app, _base, principal_of: clusters.add(app, principal_of)))
    extra.append(webui_routes(web_ui(service, clusters)))
    # members answer at their own pace: offloaded calls hold up only the requests needing them
    return build_rest_app(service, offload_calls=True, extra_routes=extra)


def web_ui(service: FederateService, clusters: ClusterRoutes) -> WebUi:
    """The Web UI's Federate flavour: sign-in with a Federate API token (no passwords here),
    the members on its Clusters page, the workflows through ``service``."""

    def members() -> list[pb.Cluster]:
        return [c for c in clusters.clusters("") if not c.local]

    return WebUi(service, None, service.accounts, None, clusters=members)


def member_condition(member: Member) -> str:
    """The name of ``member``'s health condition."""
    return f"cluster {member.name}"


def federate_health(service: FederateService) -> Health:
    """Federate's conditions: its store (probed on each ``/readyz``), the members (at least
    one reachable), one per member, and the poll loop."""
    health = Health("federate")
    bind = service.sessions.kw["bind"]
    health.probe("store", lambda: probe(bind))
    health.declare(MEMBERS, "members not polled yet")
    for member in service.members:
        health.declare(member_condition(member), "not polled yet", required=False)
    health.declare(POLLING, "no poll yet", required=False)
    health.declare(ENDS, "not looked at yet", required=False)

    def follow(change: MemberChange) -> None:
        if change.what == "joined":
            health.declare(member_condition(change.member), "not polled yet", required=False)
        else:
            health.remove(member_condition(change.member))

    service.members.subscribe(follow)
    return health


def reach_members(members: Members) -> list[tuple[Member, str | None]]:
    """Ask every member for its version: (member, None) when it answered, else (member, why
    not). Blocking: run it in a worker thread."""
    answers: list[tuple[Member, str | None]] = []
    for member in members:
        try:
            member.client().version()
        except Exception as exc:  # any failure of one member says only that it is unreachable
            member.close()  # the next poll or call reaches it anew
            member.unreachable_reason = describe(exc)
            answers.append((member, member.unreachable_reason))
        else:
            member.unreachable_reason = ""
            answers.append((member, None))
    return answers


async def poll_members(service: FederateService, health: Health, interval: float) -> None:
    """One poll of the members, then a wait of ``interval``: the turn of the poll loop."""
    answers = await asyncio.to_thread(reach_members, service.members)
    if service.registrations is not None:
        for name in await asyncio.to_thread(service.registrations.finish_draining):
            log.info("cluster %s left the federation: it has drained", name)
        await asyncio.to_thread(service.registrations.retry_ends)
        pending = await asyncio.to_thread(service.registrations.pending_ends)
        if pending:
            shown = "; ".join(f"{p.name}: {p.last_error}" for p in pending[:5])
            health.failed(
                ENDS,
                f"{len(pending)} member(s) left unreachable, their registration not ended"
                f" there yet (asked again as they are polled): {shown}",
            )
        else:
            health.passed(ENDS, "none pending")
    for member, problem in answers:
        if problem is None:
            health.passed(member_condition(member), f"reachable at {member.config.address}")
        else:
            health.failed(member_condition(member), problem)
    unreachable = [member.name for member, problem in answers if problem is not None]
    if answers and len(unreachable) == len(answers):
        health.failed(MEMBERS, f"no member is reachable ({', '.join(unreachable)})")
    else:
        reached = len(answers) - len(unreachable)
        health.passed(MEMBERS, f"{reached} of {len(answers)} members reachable")
    await asyncio.sleep(interval)


async def run_failover(failover: Failover, health: Health) -> None:
    """Failover's loop (``federation/failover.py``): a turn every half grace period (at
    least every :data:`MEMBER_POLL` seconds, at most twice a second)."""
    interval = min(MEMBER_POLL, max(failover.grace / 2, 0.5))

    async def turn() -> None:
        await asyncio.to_thread(failover.turn)
        await asyncio.sleep(interval)

    health.declare(FAILOVER, "no turn yet", required=False)
    await keep_running(FAILOVER, turn, health=health, retry=POLL_RETRY, logger=log)


def _host_port(listen: str) -> tuple[str, int]:
    try:
        return split_listen(listen)
    except ValueError as exc:  # the schema refuses it first; a caller may pass its own
        raise ConfigError(f"federate.listen: {exc}") from None


async def serve(
    service: FederateService,
    listen: str,
    stop: asyncio.Event,
    *,
    poll: float = MEMBER_POLL,
    security: ServingSecurity | None = None,
    failover: Failover | None = None,
) -> None:
    """Serve the REST API on ``listen`` until ``stop`` is set, polling the members every
    ``poll`` seconds for ``/readyz``; over TLS with ``security``'s certificate (``tls``),
    in plaintext when it is None or says so."""
    health = federate_health(service)
    runner = RestRunner(build_app(service, health))
    await runner.setup()
    host, port = _host_port(listen)
    poller = asyncio.create_task(
        keep_running(
            POLLING,
            lambda: poll_members(service, health, poll),
            health=health,
            retry=POLL_RETRY,
            logger=log,
        )
    )
    tasks = [poller]
    if failover is not None:
        tasks.append(asyncio.create_task(run_failover(failover, health)))
    try:
        ssl_context = security.ssl_context if security is not None else None
        await web.TCPSite(runner, host, port, ssl_context=ssl_context).start()
        log.info("federate serving REST on %s for %d member(s)", listen, len(service.members))
        await stop.wait()
    finally:
        for task in tasks:
            task.cancel()
        await runner.cleanup()
        service.close()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_file",
    envvar="FUZZBALL_CONFIG",
    type=click.Path(dir_okay=False),
    help="Configuration file.",
)
@click.pass_context
def cli(ctx: click.Context, config_file: str | None) -> None:
    """Fuzzball Federate: one API in front of several Orchestrate clusters."""
    ctx.obj = config_file


def _service(config_file: str | None) -> tuple[FuzzballConfig, FederateService]:
    context = prepare_process("federate", config_file)
    return context.config, build(context.config, context.drivers["router"], context.registry)


@cli.command("serve")
@click.pass_obj
def serve_command(config_file: str | None) -> None:
    """Migrate the database and serve until SIGTERM/SIGINT."""
    config, service = _service(config_file)
    # TLS unless the configuration says plaintext; neither refuses to start (exit 2)
    security = serving_security(config.tls)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    serve_until_signalled(
        lambda stop: serve(
            service,
            config.federate.listen,
            stop,
            security=security,
            failover=Failover(service, config.federate.failover_grace, registry=service.registry),
        )
    )


add_account_commands(cli, lambda config_file: _service(config_file)[1])


@cli.command("identity-key")
@click.pass_obj
def identity_key_command(config_file: str | None) -> None:
    """Print the public key members trust this Federate's forwarded identities by (put it
    in a file named in their orchestrate.trusted-federates, under federate.name)."""
    config = prepare_process("federate", config_file).config
    click.echo(public_key_pem(identity_key(config)), nl=False)


def main(argv: list[str] | None = None) -> None:
    """``fuzzball-federate``."""
    run_console_script(cli, "fuzzball-federate", argv, service=True)
