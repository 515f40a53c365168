"""The public vocabulary: statuses, stage kinds and event kinds, declared once.

Every value here is part of the API (REST JSON, gRPC messages, ``fuzzball_event`` hook calls,
``fuzzball workflow events``), so plugins and clients may match on them; renaming one is a
breaking change. The enums are ``StrEnum`` so a stored or received string compares equal to its
member, and a member formats as its plain value.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """A workflow's or a stage's status.

    The REST API spells them ``STAGE_STATUS_<NAME>`` (PENDING is ``STAGE_STATUS_UNSPECIFIED``).
    """

    PENDING = "PENDING"
    STARTED = "STARTED"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    #: Federate only: the member cluster running the workflow does not answer, so its status
    #: there cannot be known (a workflow's ``status_reason`` says why); never stored
    UNKNOWN = "UNKNOWN"

    @property
    def terminal(self) -> bool:
        """True once nothing more will happen to the workflow or stage."""
        return self in TERMINAL_STATUSES


#: Statuses nothing leaves.
TERMINAL_STATUSES = frozenset({Status.FINISHED, Status.FAILED, Status.CANCELED})


class StageKind(StrEnum):
    """What a stage stands for, as ``fuzzball workflow describe`` shows it."""

    WORKFLOW = "workflow"
    IMAGE = "image"
    VOLUME = "volume"
    JOB = "job"
    SERVICE = "service"
    #: a volume's egress (``volumes.NAME.egress``), sent once the steps using it ended
    FILE = "file"


class NodeStatus(StrEnum):
    """Whether a registered node is holding its lease (or was torn down)."""

    READY = "READY"
    OFFLINE = "OFFLINE"
    #: a deprovision hold emptied the node and it was told to shut down
    DEPROVISIONED = "DEPROVISIONED"


class InstanceState(StrEnum):
    """Where a provisioned instance is in its life (the swagger's
    ``AdminProvisionerInstanceState`` without the prefix).

    CREATING: asked of the driver, not yet registered as a node; CREATED: its node registered;
    DELETING: the driver was asked to delete it (exactly once); DELETED: gone; ERROR: the
    driver failed to create it (the instance's ``detail`` says why).
    """

    CREATING = "CREATING"
    CREATED = "CREATED"
    DELETING = "DELETING"
    DELETED = "DELETED"
    ERROR = "ERROR"


class AccountKind(StrEnum):
    """What an account is, set when it is created: what it may do beyond its own workflows.

    ``admin`` sees and controls every account's work and places holds as ``admin``;
    ``monitoring`` and ``provisioner`` are service accounts that place and release node holds
    attributed to themselves (a hold's ``source``); ``user`` runs its own workflows.
    """

    ADMIN = "admin"
    MONITORING = "monitoring"
    PROVISIONER = "provisioner"
    #: a user's personal account (named after the user; the user is its owner)
    USER = "user"
    #: a group account of an organization: its members share its workflows and secrets
    GROUP = "group"
    #: a Federate's account on a member cluster: it reads nodes to route and acts for the
    #: callers whose identity it forwards (never with more than they hold)
    FEDERATE = "federate"


#: The account kinds that are service accounts: they belong to the cluster, not to an
#: organization, and act with the permissions of their kind (:data:`SERVICE_PERMISSIONS`).
SERVICE_ACCOUNT_KINDS = frozenset(
    {AccountKind.ADMIN, AccountKind.MONITORING, AccountKind.PROVISIONER, AccountKind.FEDERATE}
)


class OrganizationRole(StrEnum):
    """A user's relationship to their organization (the swagger's OrganizationRelationship)."""

    OWNER = "ORGANIZATION_OWNER"
    MEMBER = "ORGANIZATION_MEMBER"


class AccountRelationship(StrEnum):
    """A user's relationship to an account (the swagger's AccountRelationship): the owner or
    a member of a personal account or of a group account."""

    ACCOUNT_MEMBER = "ACCOUNT_MEMBER"
    GROUP_MEMBER = "GROUP_MEMBER"
    ACCOUNT_OWNER = "ACCOUNT_OWNER"
    GROUP_OWNER = "GROUP_OWNER"


class CredentialKind(StrEnum):
    """What presented a request's credential, which bounds what the caller may do.

    ``api``: an account-scoped API token (``GET /accounts/{id}/token``, or a service
    account's token); ``login``: an access token of the OIDC issuer, good for choosing an
    account and managing one's own user, organization and secrets; ``workflow``: a running
    workflow's own token, which may submit child workflows and read (never write) secrets.
    """

    API = "api"
    LOGIN = "login"
    WORKFLOW = "workflow"


class Permission(StrEnum):
    """Everything a caller may be allowed beyond its own account's workflows.

    Which role or service-account kind grants which is :data:`ROLE_PERMISSIONS` and
    :data:`SERVICE_PERMISSIONS`, the only place that says so.
    """

    #: run, read and stop the workflows of the account in use
    RUN_WORKFLOWS = "run_workflows"
    #: read secrets of the caller's scopes (and resolve ``secret://`` references)
    READ_SECRETS = "read_secrets"
    #: create, change and delete user, account and group secrets
    WRITE_SECRETS = "write_secrets"
    #: manage the organization: members, groups, organization secrets
    MANAGE_ORGANIZATION = "manage_organization"
    #: see every organization's workflows (read only) and the cluster's nodes
    READ_CLUSTER = "read_cluster"
    #: list and describe nodes, their events and holds
    READ_NODES = "read_nodes"
    #: place and release node holds (as the caller's hold source), remove offline nodes
    HOLD_NODES = "hold_nodes"
    #: organizations, users, service accounts, cluster secrets, the audit log
    ADMINISTER_CLUSTER = "administer_cluster"
    #: provision and tear down nodes (provisioner definitions and instances)
    PROVISION_NODES = "provision_nodes"
    #: read a node's metrics through Orchestrate's scrape proxy
    SCRAPE_NODE_METRICS = "scrape_node_metrics"


#: What a member of an organization may do, by role; a cluster administrator (a user with
#: ``clusterAdmin``) has :data:`CLUSTER_ADMIN_PERMISSIONS` besides.
ROLE_PERMISSIONS: dict[OrganizationRole, frozenset[Permission]] = {
    OrganizationRole.MEMBER: frozenset(
        {Permission.RUN_WORKFLOWS, Permission.READ_SECRETS, Permission.WRITE_SECRETS}
    ),
    OrganizationRole.OWNER: frozenset(
        {
            Permission.RUN_WORKFLOWS,
            Permission.READ_SECRETS,
            Permission.WRITE_SECRETS,
            Permission.MANAGE_ORGANIZATION,
        }
    ),
}

CLUSTER_ADMIN_PERMISSIONS = frozenset(
    {
        Permission.READ_CLUSTER,
        Permission.READ_NODES,
        Permission.HOLD_NODES,
        Permission.ADMINISTER_CLUSTER,
        Permission.PROVISION_NODES,
        Permission.SCRAPE_NODE_METRICS,
    }
)

#: What each kind of service account may do: exactly what its job needs. Monitoring places
#: holds from alerts and scrapes node metrics; the provisioner holds (deprovisions) the nodes
#: it tears down and manages instances; ``admin`` is the cluster operator's own account.
SERVICE_PERMISSIONS: dict[AccountKind, frozenset[Permission]] = {
    AccountKind.ADMIN: CLUSTER_ADMIN_PERMISSIONS | {Permission.RUN_WORKFLOWS},
    AccountKind.MONITORING: frozenset(
        {Permission.READ_NODES, Permission.HOLD_NODES, Permission.SCRAPE_NODE_METRICS}
    ),
    AccountKind.PROVISIONER: frozenset(
        {Permission.READ_NODES, Permission.HOLD_NODES, Permission.PROVISION_NODES}
    ),
    AccountKind.FEDERATE: frozenset(
        {
            Permission.RUN_WORKFLOWS,
            Permission.READ_SECRETS,
            Permission.READ_NODES,
            Permission.HOLD_NODES,
        }
    ),
}

#: What a workflow's own token may do: submit and follow workflows of its account, read the
#: secrets its account can (so a controller's children resolve ``secret://``), nothing else.
WORKFLOW_TOKEN_PERMISSIONS = frozenset({Permission.RUN_WORKFLOWS, Permission.READ_SECRETS})


class SecretScope(StrEnum):
    """Who a secret belongs to and who may use it (the swagger's SecretScope).

    ``secret://user/NAME`` is the calling user's, ``account`` the account in use's,
    ``group`` the group account in use's, ``organization`` every member's,
    ``cluster`` every workflow's on the cluster (written by cluster administrators).
    """

    USER = "SECRET_SCOPE_USER"
    ACCOUNT = "SECRET_SCOPE_ACCOUNT"
    GROUP = "SECRET_SCOPE_GROUP"
    ORGANIZATION = "SECRET_SCOPE_ORGANIZATION"
    CLUSTER = "SECRET_SCOPE_CLUSTER"


class SecretType(StrEnum):
    """What a secret holds (the swagger's SecretType)."""

    VALUE = "SECRET_TYPE_VALUE"
    S3 = "SECRET_TYPE_S3"
    HTTP = "SECRET_TYPE_HTTP"
    IMAGE = "SECRET_TYPE_IMAGE"
    MAP = "SECRET_TYPE_MAP"
    DECRYPTION = "SECRET_TYPE_DECRYPTION_SIF"


class AuditAction(StrEnum):
    """Every kind of entry in the audit log."""

    LOGIN = "login"
    LOGIN_FAILED = "login_failed"
    LOCKED_OUT = "locked_out"
    TOKEN_ISSUED = "token_issued"
    PASSWORD_CHANGED = "password_changed"
    ORGANIZATION_CREATED = "organization_created"
    ORGANIZATION_UPDATED = "organization_updated"
    MEMBER_ADDED = "member_added"
    MEMBER_UPDATED = "member_updated"
    MEMBER_REMOVED = "member_removed"
    ACCOUNT_CREATED = "account_created"
    ACCOUNT_UPDATED = "account_updated"
    ACCOUNT_DELETED = "account_deleted"
    SERVICE_ACCOUNT_CREATED = "service_account_created"
    SECRET_CREATED = "secret_created"
    SECRET_UPDATED = "secret_updated"
    SECRET_DELETED = "secret_deleted"
    #: a workflow (or a node starting its job) read a secret's value
    SECRET_READ = "secret_read"
    SECRET_KEY_ROTATED = "secret_key_rotated"
    HOLD_ADDED = "hold_added"
    HOLD_RELEASED = "hold_released"
    PERMISSION_DENIED = "permission_denied"


class EventKind(StrEnum):
    """Every kind of event Orchestrate records.

    Each is stored in the event log, served by ``GET /v3/workflows/{id}:events`` and
    ``/v3/nodes/{id}:events``, and passed to the ``fuzzball_event`` hook.
    """

    # A workflow's life.
    WORKFLOW_STARTED = "workflow_started"
    WORKFLOW_FINISHED = "workflow_finished"
    WORKFLOW_FAILED = "workflow_failed"
    WORKFLOW_CANCELED = "workflow_canceled"
    #: Federate only: its member stopped answering before any job started, so it was
    #: submitted to another member (at most once; ``data``: ``from``, ``to``, ``reason``)
    WORKFLOW_REROUTED = "workflow_rerouted"
    #: Federate only: the member it was sent to and why (``data``: ``cluster``,
    #: ``costEstimate``, ``candidates`` with each one's estimate, ``rejected`` with reasons)
    WORKFLOW_ROUTED = "workflow_routed"

    # A stage's life (jobs, services, images, volumes).
    STAGE_STARTED = "stage_started"
    STAGE_FINISHED = "stage_finished"
    STAGE_FAILED = "stage_failed"
    STAGE_CANCELED = "stage_canceled"
    SCHEDULED = "scheduled"
    SCHEDULING_BLOCKED = "scheduling_blocked"
    CONTAINER_EXITED = "container_exited"
    SERVICE_READY = "service_ready"
    RETRIED = "retried"
    RETRIES_EXHAUSTED = "retries_exhausted"
    EVICTED = "evicted"
    #: a node's word on how a stage's run was set up, which did not stop it (a GPU job on
    #: a node whose driver libraries were not found; ``data.warning``)
    STAGE_WARNING = "stage_warning"

    # Image stages.
    IMAGE_RESOLVED = "image_resolved"
    IMAGE_CACHED = "image_cached"
    IMAGE_PROGRESS = "image_progress"
    IMAGE_WRITTEN_BACK = "image_written_back"
    IMAGE_WRITE_BACK_RETRYING = "image_write_back_retrying"
    IMAGE_WRITE_BACK_ABANDONED = "image_write_back_abandoned"

    # Volumes.
    #: a volume transfer's progress, or its size and time once it ended
    VOLUME_TRANSFER = "volume_transfer"

    # Nodes.
    NODE_REGISTERED = "node_registered"
    NODE_ONLINE = "node_online"
    NODE_OFFLINE = "node_offline"
    NODE_REMOVED = "node_removed"
    NODE_HOLD_ADDED = "node_hold_added"
    NODE_HOLD_RELEASED = "node_hold_released"
    #: monitoring asked for a hold it may not place (the ceiling, health.disabled)
    NODE_HOLD_REFUSED = "node_hold_refused"
    NODE_DEPROVISIONED = "node_deprovisioned"

    # Provisioning (a node asked of a provisioner definition, from request to teardown).
    INSTANCE_REQUESTED = "instance_requested"
    INSTANCE_CREATE_FAILED = "instance_create_failed"
    INSTANCE_REGISTERED = "instance_registered"
    #: an instance whose create call's answer was lost, found by its name through its driver
    INSTANCE_FOUND = "instance_found"
    INSTANCE_IDLE = "instance_idle"
    INSTANCE_DELETING = "instance_deleting"
    INSTANCE_DELETED = "instance_deleted"
    #: an instance that never registered, deleted after its registration deadline
    INSTANCE_NEVER_REGISTERED = "instance_never_registered"


#: The events of image stages, which ``fuzzball workflow status --watch`` shows as progress.
IMAGE_EVENT_KINDS = frozenset(
    {
        EventKind.IMAGE_RESOLVED,
        EventKind.IMAGE_CACHED,
        EventKind.IMAGE_PROGRESS,
        EventKind.IMAGE_WRITTEN_BACK,
        EventKind.IMAGE_WRITE_BACK_RETRYING,
        EventKind.IMAGE_WRITE_BACK_ABANDONED,
    }
)


#: The Web UI's session cookie: it holds the visitor's API token. The endpoint proxy takes it
#: off every request it passes on, as it does its own token cookie: path endpoints are on
#: the Web UI's host, and a browser sends a host's cookies on every port.
WEB_UI_SESSION_COOKIE = "fuzzball_session"
