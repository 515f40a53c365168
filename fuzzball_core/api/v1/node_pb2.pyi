from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Resources(_message.Message):
    __slots__ = ("cores", "memory", "devices")
    class DevicesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    CORES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    cores: int
    memory: int
    devices: _containers.ScalarMap[str, int]
    def __init__(self, cores: _Optional[int] = ..., memory: _Optional[int] = ..., devices: _Optional[_Mapping[str, int]] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("name", "capacity", "annotations", "device_plugin_failed", "version", "address", "cpu_cores", "metrics_address", "node_exporter_address", "health_disabled")
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_PLUGIN_FAILED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CPU_CORES_FIELD_NUMBER: _ClassVar[int]
    METRICS_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NODE_EXPORTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_DISABLED_FIELD_NUMBER: _ClassVar[int]
    name: str
    capacity: Resources
    annotations: _containers.ScalarMap[str, str]
    device_plugin_failed: bool
    version: str
    address: str
    cpu_cores: _containers.RepeatedCompositeFieldContainer[CpuCore]
    metrics_address: str
    node_exporter_address: str
    health_disabled: bool
    def __init__(self, name: _Optional[str] = ..., capacity: _Optional[_Union[Resources, _Mapping]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., device_plugin_failed: _Optional[bool] = ..., version: _Optional[str] = ..., address: _Optional[str] = ..., cpu_cores: _Optional[_Iterable[_Union[CpuCore, _Mapping]]] = ..., metrics_address: _Optional[str] = ..., node_exporter_address: _Optional[str] = ..., health_disabled: _Optional[bool] = ...) -> None: ...

class CpuCore(_message.Message):
    __slots__ = ("id", "socket", "numa", "threads")
    ID_FIELD_NUMBER: _ClassVar[int]
    SOCKET_FIELD_NUMBER: _ClassVar[int]
    NUMA_FIELD_NUMBER: _ClassVar[int]
    THREADS_FIELD_NUMBER: _ClassVar[int]
    id: int
    socket: int
    numa: int
    threads: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, id: _Optional[int] = ..., socket: _Optional[int] = ..., numa: _Optional[int] = ..., threads: _Optional[_Iterable[int]] = ...) -> None: ...

class RegisterResponse(_message.Message):
    __slots__ = ("node_id", "lease_seconds")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    lease_seconds: float
    def __init__(self, node_id: _Optional[str] = ..., lease_seconds: _Optional[float] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("node_id", "running_run_ids", "accepts_batches", "workflow_ids")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RUNNING_RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTS_BATCHES_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_IDS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    running_run_ids: _containers.RepeatedScalarFieldContainer[int]
    accepts_batches: bool
    workflow_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node_id: _Optional[str] = ..., running_run_ids: _Optional[_Iterable[int]] = ..., accepts_batches: _Optional[bool] = ..., workflow_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RunStarted(_message.Message):
    __slots__ = ("run_id", "time")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    time: float
    def __init__(self, run_id: _Optional[int] = ..., time: _Optional[float] = ...) -> None: ...

class RunExited(_message.Message):
    __slots__ = ("run_id", "exit_code", "signal", "oom_killed", "timed_out", "canceled", "message", "time", "metering_json", "volume_sizes")
    class VolumeSizesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    OOM_KILLED_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    CANCELED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    METERING_JSON_FIELD_NUMBER: _ClassVar[int]
    VOLUME_SIZES_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    exit_code: int
    signal: int
    oom_killed: bool
    timed_out: bool
    canceled: bool
    message: str
    time: float
    metering_json: str
    volume_sizes: _containers.ScalarMap[str, int]
    def __init__(self, run_id: _Optional[int] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., oom_killed: _Optional[bool] = ..., timed_out: _Optional[bool] = ..., canceled: _Optional[bool] = ..., message: _Optional[str] = ..., time: _Optional[float] = ..., metering_json: _Optional[str] = ..., volume_sizes: _Optional[_Mapping[str, int]] = ...) -> None: ...

class LogData(_message.Message):
    __slots__ = ("run_id", "stream", "data", "seq")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    stream: str
    data: bytes
    seq: int
    def __init__(self, run_id: _Optional[int] = ..., stream: _Optional[str] = ..., data: _Optional[bytes] = ..., seq: _Optional[int] = ...) -> None: ...

class Fence(_message.Message):
    __slots__ = ("run_id", "seq", "kvs")
    class KvsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    KVS_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    seq: int
    kvs: _containers.ScalarMap[str, str]
    def __init__(self, run_id: _Optional[int] = ..., seq: _Optional[int] = ..., kvs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RunReady(_message.Message):
    __slots__ = ("run_id", "time")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    time: float
    def __init__(self, run_id: _Optional[int] = ..., time: _Optional[float] = ...) -> None: ...

class NodeMessage(_message.Message):
    __slots__ = ("hello", "heartbeat", "started", "exited", "log", "fence", "ready", "metrics", "volume_removed", "batch")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    VOLUME_REMOVED_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    heartbeat: Heartbeat
    started: RunStarted
    exited: RunExited
    log: LogData
    fence: Fence
    ready: RunReady
    metrics: MetricsScraped
    volume_removed: VolumeRemoved
    batch: NodeBatch
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., started: _Optional[_Union[RunStarted, _Mapping]] = ..., exited: _Optional[_Union[RunExited, _Mapping]] = ..., log: _Optional[_Union[LogData, _Mapping]] = ..., fence: _Optional[_Union[Fence, _Mapping]] = ..., ready: _Optional[_Union[RunReady, _Mapping]] = ..., metrics: _Optional[_Union[MetricsScraped, _Mapping]] = ..., volume_removed: _Optional[_Union[VolumeRemoved, _Mapping]] = ..., batch: _Optional[_Union[NodeBatch, _Mapping]] = ...) -> None: ...

class NodeBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[NodeMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[NodeMessage, _Mapping]]] = ...) -> None: ...

class VolumeRemoved(_message.Message):
    __slots__ = ("volume_id", "error")
    VOLUME_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    volume_id: str
    error: str
    def __init__(self, volume_id: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class MetricsScraped(_message.Message):
    __slots__ = ("request_id", "text", "error", "content_type")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    text: bytes
    error: str
    content_type: str
    def __init__(self, request_id: _Optional[str] = ..., text: _Optional[bytes] = ..., error: _Optional[str] = ..., content_type: _Optional[str] = ...) -> None: ...

class Assignment(_message.Message):
    __slots__ = ("run_id", "workflow_id", "stage_name", "has_task", "task_id", "job_json", "timeout_seconds", "node_ids", "volume_ingress_json", "hosts", "cpus", "volumes_json", "workflow_token", "owner")
    class HostsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class CpusEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_NAME_FIELD_NUMBER: _ClassVar[int]
    HAS_TASK_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_JSON_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    VOLUME_INGRESS_JSON_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    VOLUMES_JSON_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    workflow_id: str
    stage_name: str
    has_task: bool
    task_id: int
    job_json: str
    timeout_seconds: float
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    volume_ingress_json: str
    hosts: _containers.ScalarMap[str, str]
    cpus: _containers.ScalarMap[str, str]
    volumes_json: str
    workflow_token: str
    owner: str
    def __init__(self, run_id: _Optional[int] = ..., workflow_id: _Optional[str] = ..., stage_name: _Optional[str] = ..., has_task: _Optional[bool] = ..., task_id: _Optional[int] = ..., job_json: _Optional[str] = ..., timeout_seconds: _Optional[float] = ..., node_ids: _Optional[_Iterable[str]] = ..., volume_ingress_json: _Optional[str] = ..., hosts: _Optional[_Mapping[str, str]] = ..., cpus: _Optional[_Mapping[str, str]] = ..., volumes_json: _Optional[str] = ..., workflow_token: _Optional[str] = ..., owner: _Optional[str] = ...) -> None: ...

class Cancel(_message.Message):
    __slots__ = ("run_id", "reason")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    reason: str
    def __init__(self, run_id: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("lease_seconds", "unknown_run_ids", "accepts_batches", "heartbeat_seconds", "acknowledges_logs", "tells_workflow_ends")
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTS_BATCHES_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGES_LOGS_FIELD_NUMBER: _ClassVar[int]
    TELLS_WORKFLOW_ENDS_FIELD_NUMBER: _ClassVar[int]
    lease_seconds: float
    unknown_run_ids: _containers.RepeatedScalarFieldContainer[int]
    accepts_batches: bool
    heartbeat_seconds: float
    acknowledges_logs: bool
    tells_workflow_ends: bool
    def __init__(self, lease_seconds: _Optional[float] = ..., unknown_run_ids: _Optional[_Iterable[int]] = ..., accepts_batches: _Optional[bool] = ..., heartbeat_seconds: _Optional[float] = ..., acknowledges_logs: _Optional[bool] = ..., tells_workflow_ends: _Optional[bool] = ...) -> None: ...

class LogsStored(_message.Message):
    __slots__ = ("through_seq",)
    class ThroughSeqEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    THROUGH_SEQ_FIELD_NUMBER: _ClassVar[int]
    through_seq: _containers.ScalarMap[int, int]
    def __init__(self, through_seq: _Optional[_Mapping[int, int]] = ...) -> None: ...

class Shutdown(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class FenceDone(_message.Message):
    __slots__ = ("run_id", "seq", "kvs")
    class KvsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    KVS_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    seq: int
    kvs: _containers.ScalarMap[str, str]
    def __init__(self, run_id: _Optional[int] = ..., seq: _Optional[int] = ..., kvs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ControlMessage(_message.Message):
    __slots__ = ("welcome", "assign", "cancel", "shutdown", "fence_done", "scrape", "remove_volume", "batch", "logs_stored", "workflow_ended")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    ASSIGN_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    FENCE_DONE_FIELD_NUMBER: _ClassVar[int]
    SCRAPE_FIELD_NUMBER: _ClassVar[int]
    REMOVE_VOLUME_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    LOGS_STORED_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ENDED_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    assign: Assignment
    cancel: Cancel
    shutdown: Shutdown
    fence_done: FenceDone
    scrape: ScrapeMetrics
    remove_volume: RemoveVolume
    batch: ControlBatch
    logs_stored: LogsStored
    workflow_ended: WorkflowEnded
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., assign: _Optional[_Union[Assignment, _Mapping]] = ..., cancel: _Optional[_Union[Cancel, _Mapping]] = ..., shutdown: _Optional[_Union[Shutdown, _Mapping]] = ..., fence_done: _Optional[_Union[FenceDone, _Mapping]] = ..., scrape: _Optional[_Union[ScrapeMetrics, _Mapping]] = ..., remove_volume: _Optional[_Union[RemoveVolume, _Mapping]] = ..., batch: _Optional[_Union[ControlBatch, _Mapping]] = ..., logs_stored: _Optional[_Union[LogsStored, _Mapping]] = ..., workflow_ended: _Optional[_Union[WorkflowEnded, _Mapping]] = ...) -> None: ...

class WorkflowEnded(_message.Message):
    __slots__ = ("workflow_ids",)
    WORKFLOW_IDS_FIELD_NUMBER: _ClassVar[int]
    workflow_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, workflow_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ControlBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ControlMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[ControlMessage, _Mapping]]] = ...) -> None: ...

class RemoveVolume(_message.Message):
    __slots__ = ("volume_id", "location_json")
    VOLUME_ID_FIELD_NUMBER: _ClassVar[int]
    LOCATION_JSON_FIELD_NUMBER: _ClassVar[int]
    volume_id: str
    location_json: str
    def __init__(self, volume_id: _Optional[str] = ..., location_json: _Optional[str] = ...) -> None: ...

class ScrapeMetrics(_message.Message):
    __slots__ = ("request_id", "target")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    target: str
    def __init__(self, request_id: _Optional[str] = ..., target: _Optional[str] = ...) -> None: ...

class RunSecretsRequest(_message.Message):
    __slots__ = ("run_id", "node_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: int
    node_id: str
    def __init__(self, run_id: _Optional[int] = ..., node_id: _Optional[str] = ...) -> None: ...

class RunSecretsResponse(_message.Message):
    __slots__ = ("env", "image_credentials", "workflow_token", "ingress_authorization", "transfer_s3")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ImageCredentialsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class IngressAuthorizationEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class TransferS3Entry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: S3Credentials
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[S3Credentials, _Mapping]] = ...) -> None: ...
    ENV_FIELD_NUMBER: _ClassVar[int]
    IMAGE_CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TOKEN_FIELD_NUMBER: _ClassVar[int]
    INGRESS_AUTHORIZATION_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_S3_FIELD_NUMBER: _ClassVar[int]
    env: _containers.ScalarMap[str, str]
    image_credentials: _containers.ScalarMap[str, str]
    workflow_token: str
    ingress_authorization: _containers.ScalarMap[str, str]
    transfer_s3: _containers.MessageMap[str, S3Credentials]
    def __init__(self, env: _Optional[_Mapping[str, str]] = ..., image_credentials: _Optional[_Mapping[str, str]] = ..., workflow_token: _Optional[str] = ..., ingress_authorization: _Optional[_Mapping[str, str]] = ..., transfer_s3: _Optional[_Mapping[str, S3Credentials]] = ...) -> None: ...

class S3Credentials(_message.Message):
    __slots__ = ("access_key_id", "secret_access_key", "region", "endpoint", "session_token")
    ACCESS_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SECRET_ACCESS_KEY_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    access_key_id: str
    secret_access_key: str
    region: str
    endpoint: str
    session_token: str
    def __init__(self, access_key_id: _Optional[str] = ..., secret_access_key: _Optional[str] = ..., region: _Optional[str] = ..., endpoint: _Optional[str] = ..., session_token: _Optional[str] = ...) -> None: ...
