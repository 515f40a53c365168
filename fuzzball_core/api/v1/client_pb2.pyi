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
STAGE_STATUS_UNSPECIFIED: WorkflowStatus
STAGE_STATUS_STARTED: WorkflowStatus
STAGE_STATUS_FINISHED: WorkflowStatus
STAGE_STATUS_FAILED: WorkflowStatus
STAGE_STATUS_CANCELED: WorkflowStatus
STAGE_KIND_UNSPECIFIED: StageKind
STAGE_KIND_WORKFLOW: StageKind
STAGE_KIND_JOB: StageKind
STAGE_KIND_FILE: StageKind
STAGE_KIND_IMAGE: StageKind
STAGE_KIND_VOLUME: StageKind
STAGE_KIND_COMPLETED: StageKind
STAGE_KIND_SERVICE: StageKind

class GetVersionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetVersionResponse(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    def __init__(self, version: _Optional[str] = ...) -> None: ...

class StartWorkflowRequest(_message.Message):
    __slots__ = ("name", "raw_specification", "definition")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RAW_SPECIFICATION_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    name: str
    raw_specification: str
    definition: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., raw_specification: _Optional[str] = ..., definition: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

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
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ListWorkflowsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListWorkflowsResponse(_message.Message):
    __slots__ = ("workflows",)
    WORKFLOWS_FIELD_NUMBER: _ClassVar[int]
    workflows: _containers.RepeatedCompositeFieldContainer[Workflow]
    def __init__(self, workflows: _Optional[_Iterable[_Union[Workflow, _Mapping]]] = ...) -> None: ...

class WorkflowStage(_message.Message):
    __slots__ = ("id", "workflow_id", "name", "kind", "status", "node_ids", "exit_code", "message", "attempt", "create_time", "start_time", "end_time", "task_count", "tasks_finished", "tasks_failed", "tasks_running")
    ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNT_FIELD_NUMBER: _ClassVar[int]
    TASKS_FINISHED_FIELD_NUMBER: _ClassVar[int]
    TASKS_FAILED_FIELD_NUMBER: _ClassVar[int]
    TASKS_RUNNING_FIELD_NUMBER: _ClassVar[int]
    id: str
    workflow_id: str
    name: str
    kind: StageKind
    status: WorkflowStatus
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    exit_code: int
    message: str
    attempt: int
    create_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    task_count: int
    tasks_finished: int
    tasks_failed: int
    tasks_running: int
    def __init__(self, id: _Optional[str] = ..., workflow_id: _Optional[str] = ..., name: _Optional[str] = ..., kind: _Optional[_Union[StageKind, str]] = ..., status: _Optional[_Union[WorkflowStatus, str]] = ..., node_ids: _Optional[_Iterable[str]] = ..., exit_code: _Optional[int] = ..., message: _Optional[str] = ..., attempt: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., task_count: _Optional[int] = ..., tasks_finished: _Optional[int] = ..., tasks_failed: _Optional[int] = ..., tasks_running: _Optional[int] = ...) -> None: ...

class Workflow(_message.Message):
    __slots__ = ("id", "name", "status", "account_id", "create_time", "start_time", "end_time", "error", "raw_specification", "stages")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RAW_SPECIFICATION_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    status: WorkflowStatus
    account_id: str
    create_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    error: str
    raw_specification: str
    stages: _containers.RepeatedCompositeFieldContainer[WorkflowStage]
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., status: _Optional[_Union[WorkflowStatus, str]] = ..., account_id: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[str] = ..., raw_specification: _Optional[str] = ..., stages: _Optional[_Iterable[_Union[WorkflowStage, _Mapping]]] = ...) -> None: ...

class GetWorkflowStatusResponse(_message.Message):
    __slots__ = ("id", "name", "workflow_status", "create_time", "start_time", "end_time", "error", "stages")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    workflow_status: WorkflowStatus
    create_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    error: str
    stages: _containers.RepeatedCompositeFieldContainer[WorkflowStage]
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., workflow_status: _Optional[_Union[WorkflowStatus, str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[str] = ..., stages: _Optional[_Iterable[_Union[WorkflowStage, _Mapping]]] = ...) -> None: ...

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
    __slots__ = ("workflow_id", "stage_name", "task_id", "after_seq")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_NAME_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    stage_name: str
    task_id: int
    after_seq: int
    def __init__(self, workflow_id: _Optional[str] = ..., stage_name: _Optional[str] = ..., task_id: _Optional[int] = ..., after_seq: _Optional[int] = ...) -> None: ...

class WorkflowLogChunk(_message.Message):
    __slots__ = ("seq", "time", "stage_name", "stream", "output", "task_id")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    STAGE_NAME_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    seq: int
    time: _timestamp_pb2.Timestamp
    stage_name: str
    stream: str
    output: bytes
    task_id: int
    def __init__(self, seq: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., stage_name: _Optional[str] = ..., stream: _Optional[str] = ..., output: _Optional[bytes] = ..., task_id: _Optional[int] = ...) -> None: ...

class ReadLogsResponse(_message.Message):
    __slots__ = ("chunks",)
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[WorkflowLogChunk]
    def __init__(self, chunks: _Optional[_Iterable[_Union[WorkflowLogChunk, _Mapping]]] = ...) -> None: ...

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

class NodeInfo(_message.Message):
    __slots__ = ("id", "name", "status", "cores", "memory", "devices", "annotations", "used_cores", "used_memory", "used_devices", "registered_at", "last_seen", "stages", "holds")
    class DevicesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class UsedDevicesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CORES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    USED_CORES_FIELD_NUMBER: _ClassVar[int]
    USED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    USED_DEVICES_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    status: str
    cores: int
    memory: int
    devices: _containers.ScalarMap[str, int]
    annotations: _containers.ScalarMap[str, str]
    used_cores: int
    used_memory: int
    used_devices: _containers.ScalarMap[str, int]
    registered_at: _timestamp_pb2.Timestamp
    last_seen: _timestamp_pb2.Timestamp
    stages: _containers.RepeatedScalarFieldContainer[str]
    holds: _containers.RepeatedCompositeFieldContainer[NodeHold]
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., status: _Optional[str] = ..., cores: _Optional[int] = ..., memory: _Optional[int] = ..., devices: _Optional[_Mapping[str, int]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., used_cores: _Optional[int] = ..., used_memory: _Optional[int] = ..., used_devices: _Optional[_Mapping[str, int]] = ..., registered_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_seen: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., stages: _Optional[_Iterable[str]] = ..., holds: _Optional[_Iterable[_Union[NodeHold, _Mapping]]] = ...) -> None: ...

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
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ...) -> None: ...
