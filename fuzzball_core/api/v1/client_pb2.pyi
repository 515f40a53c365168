import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkflowStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STAGE_STATUS_UNSPECIFIED: _ClassVar[WorkflowStatus]
    STAGE_STATUS_STARTED: _ClassVar[WorkflowStatus]
    STAGE_STATUS_FINISHED: _ClassVar[WorkflowStatus]
    STAGE_STATUS_FAILED: _ClassVar[WorkflowStatus]
    STAGE_STATUS_CANCELED: _ClassVar[WorkflowStatus]
    STAGE_STATUS_UNKNOWN: _ClassVar[WorkflowStatus]

class StageKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STAGE_KIND_UNSPECIFIED: _ClassVar[StageKind]
    STAGE_KIND_WORKFLOW: _ClassVar[StageKind]
    STAGE_KIND_JOB: _ClassVar[StageKind]
    STAGE_KIND_FILE: _ClassVar[StageKind]
    STAGE_KIND_IMAGE: _ClassVar[StageKind]
    STAGE_KIND_VOLUME: _ClassVar[StageKind]
    STAGE_KIND_COMPLETED: _ClassVar[StageKind]
    STAGE_KIND_SERVICE: _ClassVar[StageKind]

class ClusterKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLUSTER_KIND_UNSPECIFIED: _ClassVar[ClusterKind]
    CLUSTER_KIND_ORCHESTRATE: _ClassVar[ClusterKind]
    CLUSTER_KIND_FEDERATE: _ClassVar[ClusterKind]

class ClusterStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLUSTER_STATUS_UNSPECIFIED: _ClassVar[ClusterStatus]
    CLUSTER_STATUS_READY: _ClassVar[ClusterStatus]
    CLUSTER_STATUS_UNREACHABLE: _ClassVar[ClusterStatus]
    CLUSTER_STATUS_DISABLED: _ClassVar[ClusterStatus]
STAGE_STATUS_UNSPECIFIED: WorkflowStatus
STAGE_STATUS_STARTED: WorkflowStatus
STAGE_STATUS_FINISHED: WorkflowStatus
STAGE_STATUS_FAILED: WorkflowStatus
STAGE_STATUS_CANCELED: WorkflowStatus
STAGE_STATUS_UNKNOWN: WorkflowStatus
STAGE_KIND_UNSPECIFIED: StageKind
STAGE_KIND_WORKFLOW: StageKind
STAGE_KIND_JOB: StageKind
STAGE_KIND_FILE: StageKind
STAGE_KIND_IMAGE: StageKind
STAGE_KIND_VOLUME: StageKind
STAGE_KIND_COMPLETED: StageKind
STAGE_KIND_SERVICE: StageKind
CLUSTER_KIND_UNSPECIFIED: ClusterKind
CLUSTER_KIND_ORCHESTRATE: ClusterKind
CLUSTER_KIND_FEDERATE: ClusterKind
CLUSTER_STATUS_UNSPECIFIED: ClusterStatus
CLUSTER_STATUS_READY: ClusterStatus
CLUSTER_STATUS_UNREACHABLE: ClusterStatus
CLUSTER_STATUS_DISABLED: ClusterStatus

class GetVersionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetVersionResponse(_message.Message):
    __slots__ = ("version", "server_version")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    server_version: str
    def __init__(self, version: _Optional[str] = ..., server_version: _Optional[str] = ...) -> None: ...

class StartWorkflowRequest(_message.Message):
    __slots__ = ("name", "raw_specification", "definition")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RAW_SPECIFICATION_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    name: str
    raw_specification: str
    definition: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., raw_specification: _Optional[str] = ..., definition: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class StartWorkflowResponse(_message.Message):
    __slots__ = ("id", "warnings")
    ID_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    id: str
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class ValidateWorkflowRequest(_message.Message):
    __slots__ = ("raw_specification", "definition")
    RAW_SPECIFICATION_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    raw_specification: str
    definition: _struct_pb2.Struct
    def __init__(self, raw_specification: _Optional[str] = ..., definition: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ValidateWorkflowResponse(_message.Message):
    __slots__ = ("warnings",)
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class WorkflowIdRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class WorkflowIdResponse(_message.Message):
    __slots__ = ("id", "message")
    ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    message: str
    def __init__(self, id: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ListWorkflowsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListWorkflowsResponse(_message.Message):
    __slots__ = ("workflows",)
    WORKFLOWS_FIELD_NUMBER: _ClassVar[int]
    workflows: _containers.RepeatedCompositeFieldContainer[Workflow]
    def __init__(self, workflows: _Optional[_Iterable[_Union[Workflow, _Mapping]]] = ...) -> None: ...

class StageDetails(_message.Message):
    __slots__ = ("workflow_id", "node_ids", "exit_code", "attempt", "task_count", "tasks_finished", "tasks_failed", "tasks_running", "metering", "message")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNT_FIELD_NUMBER: _ClassVar[int]
    TASKS_FINISHED_FIELD_NUMBER: _ClassVar[int]
    TASKS_FAILED_FIELD_NUMBER: _ClassVar[int]
    TASKS_RUNNING_FIELD_NUMBER: _ClassVar[int]
    METERING_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    exit_code: int
    attempt: int
    task_count: int
    tasks_finished: int
    tasks_failed: int
    tasks_running: int
    metering: TrafficMetering
    message: str
    def __init__(self, workflow_id: _Optional[str] = ..., node_ids: _Optional[_Iterable[str]] = ..., exit_code: _Optional[int] = ..., attempt: _Optional[int] = ..., task_count: _Optional[int] = ..., tasks_finished: _Optional[int] = ..., tasks_failed: _Optional[int] = ..., tasks_running: _Optional[int] = ..., metering: _Optional[_Union[TrafficMetering, _Mapping]] = ..., message: _Optional[str] = ...) -> None: ...

class TrafficMetering(_message.Message):
    __slots__ = ("ingress_bytes", "ingress_packets", "egress_bytes", "egress_packets")
    INGRESS_BYTES_FIELD_NUMBER: _ClassVar[int]
    INGRESS_PACKETS_FIELD_NUMBER: _ClassVar[int]
    EGRESS_BYTES_FIELD_NUMBER: _ClassVar[int]
    EGRESS_PACKETS_FIELD_NUMBER: _ClassVar[int]
    ingress_bytes: int
    ingress_packets: int
    egress_bytes: int
    egress_packets: int
    def __init__(self, ingress_bytes: _Optional[int] = ..., ingress_packets: _Optional[int] = ..., egress_bytes: _Optional[int] = ..., egress_packets: _Optional[int] = ...) -> None: ...

class WorkflowStage(_message.Message):
    __slots__ = ("id", "name", "status", "kind", "error", "create_time", "start_time", "end_time", "details")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    status: WorkflowStatus
    kind: StageKind
    error: str
    create_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    details: StageDetails
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., status: _Optional[_Union[WorkflowStatus, str]] = ..., kind: _Optional[_Union[StageKind, str]] = ..., error: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., details: _Optional[_Union[StageDetails, _Mapping]] = ...) -> None: ...

class Workflow(_message.Message):
    __slots__ = ("id", "name", "status", "account_id", "create_time", "start_time", "end_time", "error", "raw_specification", "jobs", "total_jobs", "annotations", "user_id", "email", "cluster_id", "cluster_name", "status_reason")
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RAW_SPECIFICATION_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_JOBS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    status: WorkflowStatus
    account_id: str
    create_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    error: str
    raw_specification: str
    jobs: _containers.RepeatedCompositeFieldContainer[WorkflowStage]
    total_jobs: int
    annotations: _containers.ScalarMap[str, str]
    user_id: str
    email: str
    cluster_id: str
    cluster_name: str
    status_reason: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., status: _Optional[_Union[WorkflowStatus, str]] = ..., account_id: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[str] = ..., raw_specification: _Optional[str] = ..., jobs: _Optional[_Iterable[_Union[WorkflowStage, _Mapping]]] = ..., total_jobs: _Optional[int] = ..., annotations: _Optional[_Mapping[str, str]] = ..., user_id: _Optional[str] = ..., email: _Optional[str] = ..., cluster_id: _Optional[str] = ..., cluster_name: _Optional[str] = ..., status_reason: _Optional[str] = ...) -> None: ...

class WorkflowPlan(_message.Message):
    __slots__ = ("stages",)
    STAGES_FIELD_NUMBER: _ClassVar[int]
    stages: _containers.RepeatedCompositeFieldContainer[WorkflowStage]
    def __init__(self, stages: _Optional[_Iterable[_Union[WorkflowStage, _Mapping]]] = ...) -> None: ...

class GetWorkflowStatusResponse(_message.Message):
    __slots__ = ("id", "name", "workflow_status", "status", "create_time", "start_time", "end_time", "error")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    workflow_status: WorkflowStatus
    status: WorkflowPlan
    create_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    error: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., workflow_status: _Optional[_Union[WorkflowStatus, str]] = ..., status: _Optional[_Union[WorkflowPlan, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class ListEventsRequest(_message.Message):
    __slots__ = ("workflow_id", "after_seq")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    after_seq: int
    def __init__(self, workflow_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class WorkflowEvent(_message.Message):
    __slots__ = ("seq", "time", "kind", "message", "workflow_id", "stage_name", "node_id", "data")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    seq: int
    time: _timestamp_pb2.Timestamp
    kind: str
    message: str
    workflow_id: str
    stage_name: str
    node_id: str
    data: _struct_pb2.Struct
    def __init__(self, seq: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[str] = ..., message: _Optional[str] = ..., workflow_id: _Optional[str] = ..., stage_name: _Optional[str] = ..., node_id: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListEventsResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[WorkflowEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[WorkflowEvent, _Mapping]]] = ...) -> None: ...

class ReadLogsRequest(_message.Message):
    __slots__ = ("workflow_id", "stage_name", "task_id", "after_seq", "page_size", "page_token", "tail")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_NAME_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TAIL_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    stage_name: str
    task_id: int
    after_seq: int
    page_size: int
    page_token: str
    tail: int
    def __init__(self, workflow_id: _Optional[str] = ..., stage_name: _Optional[str] = ..., task_id: _Optional[int] = ..., after_seq: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., tail: _Optional[int] = ...) -> None: ...

class WorkflowLogChunk(_message.Message):
    __slots__ = ("output", "seq", "time", "stage_name", "stream", "task_id")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    STAGE_NAME_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    output: bytes
    seq: int
    time: _timestamp_pb2.Timestamp
    stage_name: str
    stream: str
    task_id: int
    def __init__(self, output: _Optional[bytes] = ..., seq: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., stage_name: _Optional[str] = ..., stream: _Optional[str] = ..., task_id: _Optional[int] = ...) -> None: ...

class ReadLogsResponse(_message.Message):
    __slots__ = ("chunks", "next_page_token")
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[WorkflowLogChunk]
    next_page_token: str
    def __init__(self, chunks: _Optional[_Iterable[_Union[WorkflowLogChunk, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ExplainWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "include_finished")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FINISHED_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    include_finished: bool
    def __init__(self, workflow_id: _Optional[str] = ..., include_finished: _Optional[bool] = ...) -> None: ...

class StageExplanation(_message.Message):
    __slots__ = ("stage_name", "kind", "status", "reason", "message", "estimated_start_time")
    STAGE_NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_START_TIME_FIELD_NUMBER: _ClassVar[int]
    stage_name: str
    kind: StageKind
    status: WorkflowStatus
    reason: str
    message: str
    estimated_start_time: _timestamp_pb2.Timestamp
    def __init__(self, stage_name: _Optional[str] = ..., kind: _Optional[_Union[StageKind, str]] = ..., status: _Optional[_Union[WorkflowStatus, str]] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., estimated_start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ExplainWorkflowResponse(_message.Message):
    __slots__ = ("stages",)
    STAGES_FIELD_NUMBER: _ClassVar[int]
    stages: _containers.RepeatedCompositeFieldContainer[StageExplanation]
    def __init__(self, stages: _Optional[_Iterable[_Union[StageExplanation, _Mapping]]] = ...) -> None: ...

class ListNodesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetNodeRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CpuResource(_message.Message):
    __slots__ = ("cores",)
    CORES_FIELD_NUMBER: _ClassVar[int]
    cores: int
    def __init__(self, cores: _Optional[int] = ...) -> None: ...

class MemResource(_message.Message):
    __slots__ = ("bytes",)
    BYTES_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    def __init__(self, bytes: _Optional[int] = ...) -> None: ...

class Resource(_message.Message):
    __slots__ = ("cpu", "mem", "devices")
    class DevicesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEM_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    cpu: CpuResource
    mem: MemResource
    devices: _containers.ScalarMap[str, int]
    def __init__(self, cpu: _Optional[_Union[CpuResource, _Mapping]] = ..., mem: _Optional[_Union[MemResource, _Mapping]] = ..., devices: _Optional[_Mapping[str, int]] = ...) -> None: ...

class NodeResources(_message.Message):
    __slots__ = ("total", "free", "annotations")
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    FREE_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    total: Resource
    free: Resource
    annotations: _containers.ScalarMap[str, str]
    def __init__(self, total: _Optional[_Union[Resource, _Mapping]] = ..., free: _Optional[_Union[Resource, _Mapping]] = ..., annotations: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListNodeInfo(_message.Message):
    __slots__ = ("id", "host_name", "status", "cores", "memory_gb", "devices", "running_jobs", "resource", "holds")
    ID_FIELD_NUMBER: _ClassVar[int]
    HOST_NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CORES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_GB_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOBS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    id: str
    host_name: str
    status: str
    cores: int
    memory_gb: float
    devices: int
    running_jobs: int
    resource: NodeResources
    holds: _containers.RepeatedCompositeFieldContainer[NodeHold]
    def __init__(self, id: _Optional[str] = ..., host_name: _Optional[str] = ..., status: _Optional[str] = ..., cores: _Optional[int] = ..., memory_gb: _Optional[float] = ..., devices: _Optional[int] = ..., running_jobs: _Optional[int] = ..., resource: _Optional[_Union[NodeResources, _Mapping]] = ..., holds: _Optional[_Iterable[_Union[NodeHold, _Mapping]]] = ...) -> None: ...

class RunningJob(_message.Message):
    __slots__ = ("job_name", "workflow_id")
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    job_name: str
    workflow_id: str
    def __init__(self, job_name: _Optional[str] = ..., workflow_id: _Optional[str] = ...) -> None: ...

class DeviceTypeSummary(_message.Message):
    __slots__ = ("device_type", "total_count", "available_count")
    DEVICE_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_COUNT_FIELD_NUMBER: _ClassVar[int]
    device_type: str
    total_count: int
    available_count: int
    def __init__(self, device_type: _Optional[str] = ..., total_count: _Optional[int] = ..., available_count: _Optional[int] = ...) -> None: ...

class ResourceSummary(_message.Message):
    __slots__ = ("total_cores", "available_cores", "allocated_cores", "total_memory_gb", "available_memory_gb", "allocated_memory_gb", "device_summaries")
    TOTAL_CORES_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_CORES_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_CORES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MEMORY_GB_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_MEMORY_GB_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_MEMORY_GB_FIELD_NUMBER: _ClassVar[int]
    DEVICE_SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    total_cores: int
    available_cores: int
    allocated_cores: int
    total_memory_gb: float
    available_memory_gb: float
    allocated_memory_gb: float
    device_summaries: _containers.RepeatedCompositeFieldContainer[DeviceTypeSummary]
    def __init__(self, total_cores: _Optional[int] = ..., available_cores: _Optional[int] = ..., allocated_cores: _Optional[int] = ..., total_memory_gb: _Optional[float] = ..., available_memory_gb: _Optional[float] = ..., allocated_memory_gb: _Optional[float] = ..., device_summaries: _Optional[_Iterable[_Union[DeviceTypeSummary, _Mapping]]] = ...) -> None: ...

class GetNodeInfo(_message.Message):
    __slots__ = ("id", "host_name", "status", "memory_gb", "running_jobs", "resource_summary", "resource", "holds", "registered_at", "last_seen")
    ID_FIELD_NUMBER: _ClassVar[int]
    HOST_NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_GB_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOBS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    id: str
    host_name: str
    status: str
    memory_gb: float
    running_jobs: _containers.RepeatedCompositeFieldContainer[RunningJob]
    resource_summary: ResourceSummary
    resource: NodeResources
    holds: _containers.RepeatedCompositeFieldContainer[NodeHold]
    registered_at: _timestamp_pb2.Timestamp
    last_seen: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., host_name: _Optional[str] = ..., status: _Optional[str] = ..., memory_gb: _Optional[float] = ..., running_jobs: _Optional[_Iterable[_Union[RunningJob, _Mapping]]] = ..., resource_summary: _Optional[_Union[ResourceSummary, _Mapping]] = ..., resource: _Optional[_Union[NodeResources, _Mapping]] = ..., holds: _Optional[_Iterable[_Union[NodeHold, _Mapping]]] = ..., registered_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_seen: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class NodeHold(_message.Message):
    __slots__ = ("id", "effect", "source", "reason", "placed_by", "place_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PLACED_BY_FIELD_NUMBER: _ClassVar[int]
    PLACE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: int
    effect: str
    source: str
    reason: str
    placed_by: str
    place_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[int] = ..., effect: _Optional[str] = ..., source: _Optional[str] = ..., reason: _Optional[str] = ..., placed_by: _Optional[str] = ..., place_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class NodeIdRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class RemoveNodeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListNodeHoldsResponse(_message.Message):
    __slots__ = ("holds",)
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    holds: _containers.RepeatedCompositeFieldContainer[NodeHold]
    def __init__(self, holds: _Optional[_Iterable[_Union[NodeHold, _Mapping]]] = ...) -> None: ...

class AddNodeHoldRequest(_message.Message):
    __slots__ = ("node_id", "effect", "reason")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    effect: str
    reason: str
    def __init__(self, node_id: _Optional[str] = ..., effect: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ReleaseNodeHoldRequest(_message.Message):
    __slots__ = ("node_id", "hold_id")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOLD_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    hold_id: int
    def __init__(self, node_id: _Optional[str] = ..., hold_id: _Optional[int] = ...) -> None: ...

class ReleaseNodeHoldResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UncordonNodeResponse(_message.Message):
    __slots__ = ("released", "holds")
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    released: int
    holds: _containers.RepeatedCompositeFieldContainer[NodeHold]
    def __init__(self, released: _Optional[int] = ..., holds: _Optional[_Iterable[_Union[NodeHold, _Mapping]]] = ...) -> None: ...

class ListNodesResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[ListNodeInfo]
    def __init__(self, nodes: _Optional[_Iterable[_Union[ListNodeInfo, _Mapping]]] = ...) -> None: ...

class Cluster(_message.Message):
    __slots__ = ("name", "kind", "status", "address", "labels", "nodes", "free_cores", "free_memory_gb", "free_devices", "problem", "id", "api_endpoint", "openapi_endpoint", "create_time", "update_time", "status_reason", "jwk_public_key", "local")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class FreeDevicesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    FREE_CORES_FIELD_NUMBER: _ClassVar[int]
    FREE_MEMORY_GB_FIELD_NUMBER: _ClassVar[int]
    FREE_DEVICES_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    API_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    OPENAPI_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    JWK_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: ClusterKind
    status: ClusterStatus
    address: str
    labels: _containers.ScalarMap[str, str]
    nodes: int
    free_cores: int
    free_memory_gb: float
    free_devices: _containers.ScalarMap[str, int]
    problem: str
    id: str
    api_endpoint: str
    openapi_endpoint: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    status_reason: str
    jwk_public_key: str
    local: bool
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[ClusterKind, str]] = ..., status: _Optional[_Union[ClusterStatus, str]] = ..., address: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., nodes: _Optional[int] = ..., free_cores: _Optional[int] = ..., free_memory_gb: _Optional[float] = ..., free_devices: _Optional[_Mapping[str, int]] = ..., problem: _Optional[str] = ..., id: _Optional[str] = ..., api_endpoint: _Optional[str] = ..., openapi_endpoint: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status_reason: _Optional[str] = ..., jwk_public_key: _Optional[str] = ..., local: _Optional[bool] = ...) -> None: ...

class ListClustersResponse(_message.Message):
    __slots__ = ("clusters", "page_token")
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    clusters: _containers.RepeatedCompositeFieldContainer[Cluster]
    page_token: str
    def __init__(self, clusters: _Optional[_Iterable[_Union[Cluster, _Mapping]]] = ..., page_token: _Optional[str] = ...) -> None: ...

class ClusterRegistrationConfiguration(_message.Message):
    __slots__ = ("id", "kind", "api_token", "jwk_public_key", "api_endpoint", "openapi_endpoint", "name")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    API_TOKEN_FIELD_NUMBER: _ClassVar[int]
    JWK_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    API_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    OPENAPI_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: ClusterKind
    api_token: str
    jwk_public_key: str
    api_endpoint: str
    openapi_endpoint: str
    name: str
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[_Union[ClusterKind, str]] = ..., api_token: _Optional[str] = ..., jwk_public_key: _Optional[str] = ..., api_endpoint: _Optional[str] = ..., openapi_endpoint: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class GenerateClusterRegistrationConfigurationResponse(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: ClusterRegistrationConfiguration
    def __init__(self, config: _Optional[_Union[ClusterRegistrationConfiguration, _Mapping]] = ...) -> None: ...

class RegisterClusterRequest(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: ClusterRegistrationConfiguration
    def __init__(self, config: _Optional[_Union[ClusterRegistrationConfiguration, _Mapping]] = ...) -> None: ...

class RegisterClusterResponse(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ClusterIDResponse(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...
