"""The ``fuzzball-orchestrate`` process: store, engine, node API, client API, REST gateway.

Start-up order: configuration and plugins (refuse to start, exit 2, if they are wrong), then
database migrations, then the engine's view rebuilt from the database, then the servers, then
the engine's first pass.

Its health is served on the REST port without a token: ``/healthz`` (alive) and ``/readyz``
(ready: the store answers and the engine's loop passes), each listing the conditions.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
import grpc
from aiohttp import web
from sqlalchemy import select
from sqlalchemy.orm import Session

from fuzzball_core.api.gateway_thread import GatewayThread
from fuzzball_core.api.grpc_client import add_client_servicers
from fuzzball_core.api.rest import ExtraRoutes, build_rest_app, serve_lists_from
from fuzzball_core.api.v1 import node_pb2_grpc
from fuzzball_core.config import FuzzballConfig, split_listen
from fuzzball_core.console import (
    run_console_script,
    serve_until_signalled,
    settle_startup_objects,
)
from fuzzball_core.drivers import Provisioner
from fuzzball_core.health import HEALTH_PATHS, Health, health_routes
from fuzzball_core.keepalive import server_options
from fuzzball_core.orchestrate import endpoints, volumes
from fuzzball_core.orchestrate.central_config import CentralConfig
from fuzzball_core.orchestrate.central_config_routes import central_config_routes
from fuzzball_core.orchestrate.cluster_registration_routes import (
    ClusterRegistration,
    cluster_registration_routes,
)
from fuzzball_core.orchestrate.endpoint_proxy import EndpointServing
from fuzzball_core.orchestrate.endpoint_urls import EndpointUrls
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.identity_routes import identity_routes
from fuzzball_core.orchestrate.image_stages import configure_images
from fuzzball_core.orchestrate.list_worker import ListWorker
from fuzzball_core.orchestrate.monitoring_routes import Monitoring
from fuzzball_core.orchestrate.node_api import NodeAgentServicer
from fuzzball_core.orchestrate.node_hub import NodeHub
from fuzzball_core.orchestrate.object_cache_routes import object_cache_routes
from fuzzball_core.orchestrate.oidc_routes import oidc_routes
from fuzzball_core.orchestrate.provisioner_routes import provisioner_routes
from fuzzball_core.orchestrate.provisioner_runner import ProvisionerRunner, build_provisioning
from fuzzball_core.orchestrate.run_secrets import RunSecretsService
from fuzzball_core.orchestrate.secret_routes import secret_routes
from fuzzball_core.orchestrate.service import SqlOrchestrateService
from fuzzball_core.orchestrate.storage_routes import storage_routes
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.scheduling import Scheduler
from fuzzball_core.service.account_commands import (
    add_account_commands,
    add_organization_commands,
)
from fuzzball_core.service.forwarded_identity import TrustedFederates
from fuzzball_core.service.oidc import configured_issuer
from fuzzball_core.service.revocation_channel import RevocationReceiver, RevocationSender
from fuzzball_core.service.secret_commands import add_secret_commands
from fuzzball_core.service.secrets import Secrets
from fuzzball_core.service.views import Principal
from fuzzball_core.startup import prepare_process
from fuzzball_core.store.database import (
    connect,
    migrate,
    probe,
    session_factory,
    wait_until_answering,
)
from fuzzball_core.store.models import Node, ServiceEndpoint, StorageClass
from fuzzball_core.store.private_files import private_directory
from fuzzball_core.store.secret_box import SecretBox
from fuzzball_core.tls import serving_security
from fuzzball_core.webui.app import webui_routes
from fuzzball_core.webui.context import EndpointLink, VolumeEntry, WebUi

log = logging.getLogger("fuzzball.orchestrate")

#: seconds a thread holds the GIL while another waits (Python's default is 0.005); with
#: 0.001 a 500-node list served beside a busy engine took a median of 91-147 ms, not 177-225
GIL_SWITCH_INTERVAL = 0.001

#: objects the cyclic collector lets the first generation gain between its collections
#: (CPython's default is 700). A pass makes and drops thousands of containers (ORM states,
#: statements' parameters, messages), nearly all freed by their counts: at 700 a young
#: collection ran every few reports, and what each one caught alive (a pass's rows, still
#: in use) went on to the older generations, whose collections walk every kept row of the
#: live workflows. 2,000 separate workflows: 370 young, 34 middle and 3 full collections,
#: 0.13 ms of CPU a workflow with start-up's objects frozen; 20, 1 and none at 10,000.
YOUNG_GENERATION_THRESHOLD = 10_000


@dataclass
class Orchestrate:
    """A built (not yet serving) Orchestrate."""

    config: FuzzballConfig
    engine: Engine
    service: SqlOrchestrateService
    hub: NodeHub
    #: the conditions ``/readyz`` serves: the store (probed) and the engine loop
    health: Health
    #: secrets, encrypted with the key file in the data directory
    secrets: Secrets
    #: the endpoint proxy, its routes and its keeper (docs/endpoints.md)
    endpoints: EndpointServing
    #: node metrics targets, the scrape relay, the Alertmanager receiver (issue 15)
    monitoring: Monitoring | None = None
    #: the provisioning loop beside the engine (docs/provisioners.md); always built, idle
    #: while neither the file nor the central configuration defines anything
    provisioner: ProvisionerRunner | None = None
    #: the central configuration (``/admin/centralconfig``), feeding the loop's definitions
    central_config: CentralConfig | None = None
    #: joining a Federate (``/admin/cluster/registration/configuration:generate``)
    cluster_registration: ClusterRegistration | None = None


def build(
    config: FuzzballConfig, scheduler: Scheduler, registry: PluginRegistry | None = None
) -> Orchestrate:
    """Connect to (and migrate) the database and wire the engine and the service layer."""
    private_directory(config.data_dir)  # the database, object cache and logs live there
    database = connect(config.database_url)
    wait_until_answering(database, config.database.start_wait, log.warning)
    migrate(database)
    sessions = session_factory(database)
    hub = NodeHub()
    health = Health("orchestrate")
    health.probe("store", lambda: probe(database))
    hooks = registry.hook if registry is not None else None

    def announce(event: dict[str, Any]) -> None:
        if hooks is not None:
            hooks.fuzzball_event(event=event)

    engine = Engine(
        sessions,
        scheduler,
        hub,
        lease_seconds=config.orchestrate.node_lease,
        pass_budget=config.orchestrate.pass_budget,
        max_eviction_restarts=config.orchestrate.max_eviction_restarts,
        default_retry=config.orchestrate.default_retry,
        event_hook=announce,
        health=health,
    )
    engine.context.log_limits = config.orchestrate.logs
    service = SqlOrchestrateService(
        sessions, engine, registry=registry, token_lifetime=config.accounts.token_lifetime
    )
    configure_images(engine, service, config, registry)
    service.oidc = configured_issuer(config, sessions, service.identity)
    service.trusted_federates = TrustedFederates.from_files(config.orchestrate.trusted_federates)
    service.cluster_name = config.orchestrate.cluster_name
    secrets = Secrets(sessions, SecretBox(config.data_dir))
    endpoints = EndpointServing(
        engine,
        service.authenticate,
        config.orchestrate.endpoints,
        health,
        secure=config.tls.cert_file is not None,
        revocations=service.accounts.revocations,
    )
    built = Orchestrate(config, engine, service, hub, health, secrets, endpoints)
    built.monitoring = Monitoring(config, engine, hub)
    built.cluster_registration = ClusterRegistration(
        sessions,
        service.accounts,
        lambda: service.trusted_federates,
        name=config.orchestrate.cluster_name,
        oidc=lambda: service.oidc,
    )
    built.cluster_registration.load()
    provisioning = build_provisioning(config, engine, registry)
    built.provisioner = ProvisionerRunner(engine, provisioning)
    load_driver = None if registry is None else functools.partial(_provisioner, registry)
    built.central_config = CentralConfig(
        engine.sessions, provisioning, load_driver, box=secrets.box
    )
    built.central_config.seal_clear_revisions()
    built.central_config.apply_latest()
    # both the file's and the central definitions are known now: refuse to run while an
    # instance belongs to neither, since nothing could delete it
    provisioning.check_instances_defined()
    return built


def _provisioner(registry: PluginRegistry, name: str) -> Provisioner:
    """The ``fuzzball.provisioners`` driver ``name`` (for central configuration
    definitions)."""
    driver: Provisioner = registry.driver("fuzzball.provisioners", name)
    return driver


def rest_app(orchestrate: Orchestrate) -> web.Application:
    """The REST gateway Orchestrate serves: the API's routes and every process route (object
    cache, identity, health, secrets, OIDC). The route isolation tests serve this same app,
    so a route added here is one they must cover."""
    add_health = health_routes(orchestrate.health)
    health = ExtraRoutes(add=lambda app, *_: add_health(app), public_paths=HEALTH_PATHS)
    return build_rest_app(
        orchestrate.service,
        extra_routes=[
            object_cache_routes(orchestrate.service),
            identity_routes(orchestrate.service.identity),
            health,
            secret_routes(orchestrate.secrets),
            oidc_routes(orchestrate.service),
            orchestrate.endpoints.routes,
            storage_routes(orchestrate.engine),
            *([orchestrate.monitoring.routes()] if orchestrate.monitoring else []),
            provisioner_routes(orchestrate.engine.context.provisioning),
            *(
                [central_config_routes(orchestrate.central_config)]
                if orchestrate.central_config
                else []
            ),
            *(
                [cluster_registration_routes(orchestrate.cluster_registration)]
                if orchestrate.cluster_registration
                else []
            ),
            webui_routes(web_ui(orchestrate)),
        ],
    )


def web_ui(orchestrate: Orchestrate) -> WebUi:
    """What the Web UI's pages (served at ``/``) read and act through."""
    service = orchestrate.service
    endpoints = orchestrate.config.orchestrate.endpoints
    return WebUi(
        service,
        service.identity,
        service.accounts,
        service.sessions,
        orchestrate.secrets,
        endpoint_links(orchestrate.engine.sessions, orchestrate.endpoints.urls),
        volumes=volume_entries(orchestrate.engine.sessions),
        endpoint_cookie=endpoints.cookie if endpoints.listen else "",
        endpoint_domain=_subdomain_domain(orchestrate.endpoints.urls) if endpoints.listen else "",
    )


def _subdomain_domain(urls: EndpointUrls) -> str:
    """The domain subdomain endpoints are under; "" when they have none here (an IP)."""
    return "" if urls.subdomain_problem() else urls.domain


def endpoint_links(
    sessions: Callable[[], Session], urls: EndpointUrls
) -> Callable[[Principal], list[EndpointLink]]:
    """The endpoints page's listing: the endpoint routes' own (the caller's account's
    persistent endpoints and its live workflows'), each with its URL at the proxy."""

    def links(who: Principal) -> list[EndpointLink]:
        with sessions() as session:
            views = endpoints.listed(session, who)
        return [
            EndpointLink(
                v.id,
                v.name,
                urls.url(ServiceEndpoint(id=v.id, kind=v.type)),
                v.type,
                v.workflow_id,
                v.persistent,
            )
            for v in views
        ]

    return links


def volume_entries(sessions: Callable[[], Session]) -> Callable[[Principal], list[VolumeEntry]]:
    """The volumes page's listing: the volume routes' own (``GET /v3/volumes``), with the
    holding node's name."""

    def entries(who: Principal) -> list[VolumeEntry]:
        with sessions() as session:
            rows = volumes.listed(session, volumes.VolumeOwner.of(who))
            classes = {c.id: c.name for c in session.scalars(select(StorageClass))}
            node_ids = {row.node_id for row in rows if row.node_id}
            names = {
                node_id: name
                for node_id, name in session.execute(
                    select(Node.id, Node.name).where(Node.id.in_(node_ids))
                )
            }
            return [
                VolumeEntry(
                    reference=volumes.reference_of(session, row),
                    storage_class=classes.get(row.class_id, ""),
                    scope=row.scope,
                    node=names.get(row.node_id, row.node_id) if row.node_id else "",
                    size_bytes=row.size_bytes,
                    access_time=row.access_time,
                    status=row.status.removeprefix("VOLUME_STATUS_").lower(),
                )
                for row in rows
            ]

    return entries


#: Calls gRPC core holds for this server before the loop takes them. Its defaults hold 1,000
#: and refuse the calls beyond (CANCELLED, at random up to 3,000, every one beyond): the
#: asyncio server takes one call a turn of the loop, so when a cluster's nodes all call at
#: once (their first join, a flap, Orchestrate restarted) thousands are refused and each node
#: tries again after its backoff. Measured at 5,000 hollow nodes: about 36,000 refused calls
#: through a join and a flap, half of the fleets' CPU. Held calls are small (a Register, a
#: stream's open); one held past ``grpc.server_max_unrequested_time_in_server`` (30 s) is
#: still cancelled.
PENDING_CALLS = 20_000


def grpc_server_options(config: FuzzballConfig) -> list[tuple[str, int]]:
    """The gRPC server's arguments: the node keepalive's pings, one listener per port, and
    room for a whole cluster's calls arriving at once (:data:`PENDING_CALLS`)."""
    return [
        ("grpc.so_reuseport", 0),
        *server_options(config.orchestrate.node_keepalive),
        ("grpc.server.max_pending_requests", PENDING_CALLS),
        ("grpc.server.max_pending_requests_hard_limit", 2 * PENDING_CALLS),
    ]


async def serve(orchestrate: Orchestrate, stop: asyncio.Event) -> None:
    """Serve gRPC (nodes and clients) and REST until ``stop`` is set."""
    config = orchestrate.config.orchestrate
    # TLS unless the configuration says plaintext; neither refuses before anything listens
    security = serving_security(orchestrate.config.tls)
    # keepalive pings: a node gone without its connection closing is found in
    # interval + timeout, and its stream's grace starts then (fuzzball_core.keepalive)
    server = grpc.aio.server(options=grpc_server_options(orchestrate.config))
    node_pb2_grpc.add_NodeAgentServicer_to_server(
        NodeAgentServicer(
            orchestrate.engine,
            orchestrate.hub,
            config.node_token,
            monitoring=orchestrate.monitoring,
            provisioning=orchestrate.engine.context.provisioning,
            run_secrets=RunSecretsService.attach(
                orchestrate.engine, orchestrate.service.accounts, orchestrate.secrets
            ),
        ),
        server,
    )
    add_client_servicers(server, orchestrate.service)
    if security.grpc_credentials is None:
        server.add_insecure_port(config.grpc_listen)
    else:
        server.add_secure_port(config.grpc_listen, security.grpc_credentials)
    # REST is served from a thread of its own: the engine's passes hold this loop, and a
    # list waiting out each pass it met took a third of a second at 500 busy nodes
    host, port = split_listen(config.rest_listen)
    app = rest_app(orchestrate)
    # the workflow and node lists from a process of their own (list_worker): in this one they
    # took their CPU in GIL turns with the engine's thread, 180-240 ms a node list (median) at
    # 5,000 busy nodes for 25-30 ms of CPU; served here until the worker is ready
    lists = ListWorker(
        orchestrate.service.node_usages,
        orchestrate.config.database_url,
        orchestrate.service.cluster_name,
    )
    serve_lists_from(app, lists)
    gateway = GatewayThread(app, host, port, ssl_context=security.ssl_context)
    orchestrate.service.node_usages.serve_from(asyncio.get_running_loop())
    lists.start()
    # the gateway's thread and the engine's take turns at the GIL: a thread waiting for it
    # asks the holder after this long, so a list waits 1 ms per turn of a pass, not 5 ms
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    _, middle, full = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, full)
    # the engine's view is rebuilt just before the first node can be heard (after the REST
    # app's build, which holds the loop): a returning node's Register and Hello are
    # reconciled against the runs the database holds on it, and the restart's grace for the
    # nodes' leases starts as the node API serves
    try:
        orchestrate.engine.recover()
    except Exception:  # a store not answering yet: the engine's loop rebuilds, and retries
        log.exception("rebuilding the engine's view failed; its loop will try again")
    # REST listens first and the engine's loop is started before the node API: after a
    # restart every node's Register arrives as soon as gRPC serves, and the gateway's
    # start-up and the first pass would otherwise take their turns behind them
    await gateway.start()
    engine_task = asyncio.create_task(orchestrate.engine.run())
    await server.start()
    if orchestrate.monitoring is not None:
        await orchestrate.monitoring.start()
    await orchestrate.endpoints.start(security.ssl_context)
    # revocations another process made (the `fuzzball-orchestrate revoke-token` command)
    revocations = RevocationReceiver(
        orchestrate.service.sessions.kw["bind"],
        orchestrate.config.data_dir,
        orchestrate.service.accounts.revocations,
        orchestrate.health,
    )
    await revocations.start()
    provisioner_stop = asyncio.Event()
    provisioner_task = (
        asyncio.create_task(orchestrate.provisioner.run(provisioner_stop))
        if orchestrate.provisioner is not None
        else None
    )
    log.info(
        "orchestrate serving gRPC on %s and REST on %s (%s)",
        config.grpc_listen,
        config.rest_listen,
        "TLS" if security.ssl_context is not None else "plaintext, as tls.plaintext says",
    )
    try:
        await stop.wait()
    finally:
        provisioner_stop.set()
        if provisioner_task is not None:
            await provisioner_task
        engine_task.cancel()
        if orchestrate.monitoring is not None:
            await orchestrate.monitoring.stop()
        await revocations.close()
        await orchestrate.endpoints.close()
        orchestrate.hub.close_all()
        await server.stop(grace=1)
        await gateway.stop()
        await asyncio.to_thread(lists.stop)


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
    """Fuzzball Orchestrate: the control plane."""
    ctx.obj = config_file


@cli.command("serve")
@click.pass_obj
def serve_command(config_file: str | None) -> None:
    """Migrate the database and serve until SIGTERM/SIGINT."""
    context = prepare_process("orchestrate", config_file)
    serving_security(context.config.tls)  # refuse to start before migrating, exit 2
    # before build: waiting for the database server is logged with the time
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    orchestrate = build(context.config, context.drivers["scheduler"], context.registry)
    settle_startup_objects()

    serve_until_signalled(lambda stop: serve(orchestrate, stop))


def _service(config_file: str | None) -> SqlOrchestrateService:
    context = prepare_process("orchestrate", config_file)
    service = build(context.config, context.drivers["scheduler"], context.registry).service
    # a command revoking tokens tells the running Orchestrate, which may keep their callers
    sender = RevocationSender(service.sessions.kw["bind"], context.config.data_dir)
    service.accounts.revocations.subscribe(sender)
    return service


add_account_commands(cli, _service)
add_organization_commands(cli, lambda config_file: _service(config_file).identity)


def _secrets(config_file: str | None) -> Secrets:
    context = prepare_process("orchestrate", config_file)
    return build(context.config, context.drivers["scheduler"], context.registry).secrets


add_secret_commands(cli, _secrets)


def main(argv: list[str] | None = None) -> None:
    """``fuzzball-orchestrate``."""
    run_console_script(cli, "fuzzball-orchestrate", argv, service=True)
