"""One unit of the engine's work: a database session and what leaves once it commits.

Every change the engine makes happens inside a :class:`Transaction`: its session, the
messages for nodes and the events for hooks that leave only once the session commits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from sqlalchemy import (
    Column,
    Executable,
    Result,
    Table,
    bindparam,
    event,
    func,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import ORMExecuteState, Session
from sqlalchemy.orm.attributes import instance_state, set_committed_value

from fuzzball_core.orchestrate.live_rows import LiveRows
from fuzzball_core.orchestrate.messages import ToNode
from fuzzball_core.store.database import row_key
from fuzzball_core.store.models import ApiToken, Event, Run, Stage, Workflow
from fuzzball_core.vocabulary import EventKind

#: The events table, for its Core INSERT (a mapped class's ``__table__`` is typed loosely).
_EVENTS = cast(Table, Event.__table__)
#: The runs table, for the Core UPDATEs of :meth:`Transaction.write_run`.
_RUNS = cast(Table, Run.__table__)
#: The UPDATE of one run by id, for an executemany (built once: building it in each pass
#: was a sixth of the writes' time in a profile); it sets the columns its rows name.
_UPDATE_RUN = update(_RUNS).where(_RUNS.c.id == bindparam("run_id"))
#: The api tokens table, for the Core UPDATE revoking the tokens of the workflows that ended.
_TOKENS = cast(Table, ApiToken.__table__)
#: Revoke the live tokens of the workflows named ``ended`` at ``now`` (built once, on the
#: table: the ORM's UPDATE of the same rows, with its compilation and its evaluation of the
#: rows the session holds, was about a twentieth of Orchestrate's samples under 2,000
#: separate workflows).
_REVOKE_TOKENS = (
    update(_TOKENS)
    .where(
        _TOKENS.c.workflow_id.in_(bindparam("ended", expanding=True)),
        _TOKENS.c.revoked_at.is_(None),
    )
    .values(revoked_at=bindparam("now"))
)
#: Insert runs, returning each one's stage, task and id (for an executemany: one statement
#: on SQLite, the rows matched to their ids by stage and task; PostgreSQL's is below).
_INSERT_RUNS = insert(_RUNS).returning(_RUNS.c.stage_id, _RUNS.c.task_id, _RUNS.c.id)
#: The columns :meth:`Transaction.add_task_runs` rows give (the others take their defaults).
_RUN_COLUMNS = ("workflow_id", "stage_id", "task_id", "status", "created_at", "attempt")
#: PostgreSQL: the same INSERT from one array parameter a column (``unnest``), one text
#: whatever the number of rows. The executemany's VALUES text grows with the rows (8
#: parameters each), past what psycopg caches (4,096 characters, 50 parameters), so psycopg
#: converted it again each pass: over half of the INSERT's CPU at 50 rows.
_INSERT_RUNS_ARRAYS = (
    insert(_RUNS)
    .from_select(
        _RUN_COLUMNS,
        select(
            *func.unnest(
                *(bindparam(name, type_=ARRAY(_RUNS.c[name].type)) for name in _RUN_COLUMNS)
            )
            .table_valued(*_RUN_COLUMNS)
            .render_derived()
            .columns
        ),
    )
    .returning(_RUNS.c.stage_id, _RUNS.c.task_id, _RUNS.c.id)
)
#: The UPDATE of one row by id of each table :meth:`Transaction.write_held` writes (for an
#: executemany; built once a table, like :data:`_UPDATE_RUN`).
_UPDATE_HELD: dict[Table, Any] = {}
#: Where a session keeps the transaction whose run writes or run inserts wait
#: (``Session.info``).
_WRITES_RUNS = "fuzzball.run_writes"
#: The execution option of a read that no waiting write could change
#: (:meth:`Transaction.read_past_writes`): the writes stay waiting for the commit.
_PAST_WRITES = "fuzzball_past_writes"

#: The events that end a workflow: its tokens are revoked by the transaction ending it.
WORKFLOW_ENDINGS = frozenset(
    {EventKind.WORKFLOW_FINISHED, EventKind.WORKFLOW_FAILED, EventKind.WORKFLOW_CANCELED}
)


#: a mapped row's class
_Row = TypeVar("_Row")


@dataclass
class Transaction:
    """One engine pass's session, plus what to send and announce once it commits."""

    session: Session
    now: float
    outbox: list[tuple[str, ToNode]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: rows loaded in bulk ahead of use: the session's identity map holds rows weakly, so
    #: without these references they would be dropped and loaded again one by one
    loaded: list[Any] = field(default_factory=list)
    #: the stage rows of the workflows :meth:`load_workflows` loaded, by workflow id (stage
    #: rows are written only at submission, so a list read once holds for the transaction)
    stages: dict[str, list[Stage]] = field(default_factory=dict)
    #: what to do in memory once the transaction committed, before its messages go out
    #: (kept from a transaction that failed, it would describe rows that do not exist)
    committed: list[Callable[[], None]] = field(default_factory=list)
    #: array stages whose window of tasks in flight had room made in this transaction, to
    #: be filled once before it commits (:func:`~fuzzball_core.orchestrate.placement.
    #: fill_task_windows`) rather than once per task that ended
    windows_due: set[int] = field(default_factory=set)
    #: columns to write to runs the session does not hold (:meth:`write_run`), by run id
    run_writes: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: rows to insert as the transaction commits (:meth:`insert_at_commit`), by table
    inserts: dict[Table, list[dict[str, Any]]] = field(default_factory=dict)
    #: new runs waiting for their INSERT (:meth:`add_task_runs`): each stage's rows, and what
    #: to call with their ids
    runs_due: list[tuple[list[dict[str, Any]], Callable[[dict[int | None, int]], None]]] = field(
        default_factory=list
    )
    #: (stage id, task id) of the rows in :attr:`runs_due` (their ids are matched by these)
    run_keys_due: set[tuple[int, int | None]] = field(default_factory=set)
    #: columns of rows the session holds to write with a Core UPDATE (:meth:`write_held`),
    #: by table, then by the row's id
    held_writes: dict[Table, dict[Any, dict[str, Any]]] = field(default_factory=dict)
    #: live workflows' rows kept between transactions (the engine's): read from there by
    #: :meth:`load_workflows` and :meth:`load_stages`, kept there as this one commits
    kept: LiveRows | None = None

    def __post_init__(self) -> None:
        if self.kept is not None:
            self.kept.watch(self.session)

    def load(self, model: type, ids: Iterable[Any]) -> None:
        """Load the rows of ``model`` with these primary keys into the session, at once."""
        wanted = set(ids)
        if wanted:
            key = model.__mapper__.primary_key[0]  # type: ignore[attr-defined]
            self.loaded.extend(self.session.scalars(select(model).where(key.in_(wanted))))

    def load_runs(self, run_ids: Iterable[int]) -> None:
        """Load these runs with their stages and workflows in one joined query (a pass that
        applies reports needs all three; three queries cost three round trips). Runs this
        session already holds with both (one it read earlier in this pass) are not read
        again."""
        wanted = {run_id for run_id in run_ids if not self._held(run_id)}
        if wanted:
            rows = self.session.execute(
                select(Run, Stage, Workflow)
                .join(Stage, Stage.id == Run.stage_id)
                .join(Workflow, Workflow.id == Run.workflow_id)
                .where(Run.id.in_(wanted))
            )
            self.loaded.extend(row for triple in rows for row in triple)

    def load_stages(self, stage_ids: Iterable[int]) -> None:
        """Load these stages with their workflows in one joined query (the runs applied
        without their rows still end or start tasks of them), those the session lacks."""
        wanted = {stage_id for stage_id in stage_ids if not self.holds(Stage, stage_id)}
        if wanted and self.kept is not None:
            self._attach_kept(self.kept.workflows_of(wanted))
            wanted = {stage_id for stage_id in wanted if not self.holds(Stage, stage_id)}
        if wanted:
            rows = self.session.execute(
                select(Stage, Workflow)
                .join(Workflow, Workflow.id == Stage.workflow_id)
                .where(Stage.id.in_(wanted))
            )
            self.loaded.extend(row for pair in rows for row in pair)

    def _held(self, run_id: int) -> bool:
        """Whether the session holds the run, its stage and its workflow, none expired."""
        held = self.session.identity_map
        run = held.get(row_key(Run, run_id))
        if run is None or inspect(run).expired_attributes:
            return False
        stage = held.get(row_key(Stage, run.stage_id))
        workflow = held.get(row_key(Workflow, run.workflow_id))
        return (
            stage is not None
            and workflow is not None
            and not inspect(stage).expired_attributes
            and not inspect(workflow).expired_attributes
        )

    def holds(self, model: type, key: Any) -> bool:
        """Whether the session holds the row of ``model`` with this primary key."""
        return row_key(model, key) in self.session.identity_map

    def get(self, model: type[_Row], key: Any) -> _Row | None:
        """``Session.get``: the row the session holds, without its work (6-8 µs a call for a
        row at hand; a separate workflow's passes ask for their rows about 11 times), or,
        for a row it lacks or holds expired, ``Session.get``'s read."""
        row = self.session.identity_map.get(row_key(model, key))
        if row is None or instance_state(row).expired_attributes:
            return self.session.get(model, key)
        return cast(_Row, row)

    def write_run(self, run_id: int, **values: Any) -> None:
        """Write these columns of a run the session does not hold, without loading its row
        (its state is the engine's :class:`~fuzzball_core.orchestrate.context.LiveRun`):
        the writes of a pass go out together, as one UPDATE per set of columns, before the
        session's next statement (so a query or a load sees them) or at the commit. A run
        the session holds is changed through its row instead (or the two would disagree)."""
        self.session.info[_WRITES_RUNS] = self
        self.run_writes.setdefault(run_id, {}).update(values)

    def write_held(self, row: Any, *keys: str) -> None:
        """Write these columns of a row the session holds, as they were just set on it, with
        the other rows of its table written so in this pass, in one UPDATE per set of
        columns (sent like :meth:`write_run`'s, and before any flush), not through the ORM's
        flush: the row keeps the values as committed (it does not flush them again; reads of
        it in the pass see them). A flush's unit of work for a stage's start, one row a
        workflow, cost more than the row's UPDATE."""
        values = {key: getattr(row, key) for key in keys}
        for key, value in values.items():
            set_committed_value(row, key, value)
        state = inspect(row)
        if not state.committed_state:
            # nothing else of the row waits: it leaves the session's dirty rows too, or the
            # commit would run a flush's unit of work only to find it unchanged (what the
            # session itself does to a row it flushed)
            state._commit_all(state.dict, self.session.identity_map)
        self._hold(row, values)

    def _hold(self, row: Any, values: dict[str, Any]) -> None:
        """Keep ``values`` of ``row`` for the pass's UPDATEs of its table."""
        self.session.info[_WRITES_RUNS] = self
        table = cast(Table, type(row).__table__)
        self.held_writes.setdefault(table, {}).setdefault(row.id, {}).update(values)

    def write_changed(self, row: Any) -> None:
        """:meth:`write_held` of every column changed on the row since it was read (or last
        written so): a run's, stage's and workflow's ends, with what was set beside them
        (exit codes, messages), three rows a workflow that the ORM's flush cost more for
        than their UPDATEs. A row not yet inserted, or with a change that is not one of its
        table's columns under its own name, is left to the flush."""
        state = inspect(row)
        if not state.persistent or not state.committed_state:
            return
        changed = state.committed_state
        if not _plain_columns(state.mapper).issuperset(changed):
            return
        values = {key: state.dict[key] for key in changed}
        # every change of the row is written: it leaves the session's dirty rows, as after a
        # flush, or the commit would run a unit of work only to find it unchanged
        state._commit_all(state.dict, self.session.identity_map)
        self._hold(row, values)

    def add_task_runs(
        self, rows: list[dict[str, Any]], then: Callable[[dict[int | None, int]], None]
    ) -> None:
        """Insert these PENDING runs of one stage (an array's tasks, or a stage's single run:
        task id None) without ORM rows, with the other stages' runs added in this
        transaction: in one statement before the session's next statement, the pass's
        placements (:meth:`insert_runs`) or the commit; then call ``then`` with their ids by
        task id. The session does not hold them: placed in this pass, they are assigned from
        the queue (a later load or query reads them like any run). A stage's run inserted
        and flushed on its own, one statement and one flush each, cost about a twentieth of
        Orchestrate's samples under 2,000 separate workflows (a stage each)."""
        keys = {(row["stage_id"], row["task_id"]) for row in rows}
        if not keys.isdisjoint(self.run_keys_due):
            self.insert_runs()  # the ids are matched by stage and task: one of each per batch
        self.session.info[_WRITES_RUNS] = self
        self.runs_due.append((rows, then))
        self.run_keys_due |= keys

    def insert_runs(self) -> None:
        """Insert the runs :meth:`add_task_runs` keeps waiting, in one statement, and hand
        each stage's ids to its ``then``."""
        due, self.runs_due, self.run_keys_due = self.runs_due, [], set()
        if not due:
            return
        # ids matched by stage and task rather than by the rows' order: an order kept costs
        # one INSERT per row on SQLite, where one INSERT ... RETURNING takes them all. The
        # connection's execute, not the session's: that would call this again first
        connection = self.session.connection()
        every_row = [row for rows, _ in due for row in rows]
        if connection.dialect.name == "postgresql":
            arrays = {name: [row[name] for row in every_row] for name in _RUN_COLUMNS}
            result = connection.execute(_INSERT_RUNS_ARRAYS, arrays)
        else:
            result = connection.execute(_INSERT_RUNS, every_row)
        ids = {(stage_id, task_id): run_id for stage_id, task_id, run_id in result}
        for rows, then in due:
            then({row["task_id"]: ids[row["stage_id"], row["task_id"]] for row in rows})

    def read_past_writes(self, statement: Executable) -> Result[*tuple[Any, ...]]:
        """Execute ``statement``, a read of rows that nothing waiting in this transaction
        touches (a pass's reads of what it has not read or written yet: the
        ``output_received`` of runs it has not noted output of, usage rows it does not hold),
        without sending the waiting writes (:meth:`write_run`, :meth:`write_held`) or
        flushing the session's changed rows first: they wait for the next statement that
        could see them, or the commit, and go out together in fewer statements. Sent
        before each chunk of reports' reads, a pass's run writes and its stages' and usage
        rows' UPDATEs cost a round trip each a chunk."""
        return self.session.execute(
            statement.execution_options(**{_PAST_WRITES: True, "autoflush": False})
        )

    def insert_at_commit(self, table: Table, row: dict[str, Any]) -> None:
        """Insert ``row`` into ``table`` as the transaction commits, with the other rows of
        that table in one statement, not as an ORM row: for rows nothing reads in the
        transaction that writes them (a workflow's token minted in the pass), except the
        commit's own revocation, which follows them."""
        self.inserts.setdefault(table, []).append(row)

    def send_waiting(self) -> None:
        """Send the waiting run inserts (:meth:`insert_runs`) and run writes
        (:meth:`write_runs`)."""
        self.session.info.pop(_WRITES_RUNS, None)
        self.insert_runs()
        if self.run_writes:
            self.write_runs()
        if self.held_writes:
            self._write_held_rows()

    def write_runs(self) -> None:
        """Send the waiting :meth:`write_run` writes (one executemany per set of columns)."""
        writes, self.run_writes = self.run_writes, {}
        shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for run_id, values in writes.items():
            shapes.setdefault(tuple(sorted(values)), []).append({"run_id": run_id, **values})
        # the connection's execute, not the session's: that would call this again first
        connection = self.session.connection()
        for rows in shapes.values():
            connection.execute(_UPDATE_RUN, rows)

    def _write_held_rows(self) -> None:
        """Send the waiting :meth:`write_held` writes (one executemany per table and set of
        columns)."""
        writes, self.held_writes = self.held_writes, {}
        connection = self.session.connection()
        for table, rows in writes.items():
            statement = _UPDATE_HELD.get(table)
            if statement is None:
                statement = _UPDATE_HELD[table] = update(table).where(
                    table.c.id == bindparam("row_id")
                )
            shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
            for row_id, values in rows.items():
                shapes.setdefault(tuple(sorted(values)), []).append({"row_id": row_id, **values})
            for same in shapes.values():
                connection.execute(statement, same)

    def load_workflows(self, workflow_ids: Iterable[str]) -> None:
        """Load these workflows with all their stages in one joined query (advancing a
        workflow reads both: two queries per workflow otherwise)."""
        wanted = set(workflow_ids) - self.stages.keys()
        if wanted and self.kept is not None:
            wanted -= self._attach_kept(wanted)
        if not wanted:
            return
        rows = self.session.execute(
            select(Workflow, Stage)
            .outerjoin(Stage, Stage.workflow_id == Workflow.id)
            .where(Workflow.id.in_(wanted))
        )
        for workflow, stage in rows:
            stages = self.stages.setdefault(workflow.id, [])
            self.loaded.append(workflow)
            if stage is not None:
                stages.append(stage)
                self.loaded.append(stage)

    def _attach_kept(self, workflow_ids: Iterable[str]) -> set[str]:
        """Attach the kept rows of these workflows (:attr:`kept`); the workflows attached."""
        assert self.kept is not None
        attached = self.kept.attach(self.session, workflow_ids)
        self.stages.update(attached)
        return set(attached)

    def stages_of(self, workflow_id: str) -> list[Stage]:
        """The workflow's stage rows: as :meth:`load_workflows` loaded them, else queried."""
        loaded = self.stages.get(workflow_id)
        if loaded is not None:
            return list(loaded)
        return list(self.session.scalars(select(Stage).where(Stage.workflow_id == workflow_id)))

    def commit(self) -> None:
        """Write the waiting run writes and inserts, the recorded events (one multi-row
        INSERT instead of an ORM object each, whose construction and flush cost more than
        the row), revoke the tokens of the workflows that ended, and commit the session."""
        self.send_waiting()
        if self.inserts:
            self.session.flush()  # the rows they refer to go first
            connection = self.session.connection()
            for table, rows in self.inserts.items():
                connection.execute(insert(table), rows)
            self.inserts = {}
        ended = {
            event["workflow_id"]
            for event in self.events
            if event["kind"] in WORKFLOW_ENDINGS and event["workflow_id"]
        }
        if ended:
            # in this transaction, not a session and commit of its own per workflow after
            # it: a token never outlives its workflow's end, and a failed pass keeps both
            # after a flush and the inserts: a token minted in this pass is revoked too
            self.session.flush()
            self.session.connection().execute(
                _REVOKE_TOKENS, {"ended": sorted(ended), "now": self.now}
            )
        if self.events:
            # the table's Core INSERT: the ORM's bulk insert of the same rows (``insert(
            # Event)``) cost a hello-world pass more than the rest of its commit
            self.session.execute(
                insert(_EVENTS),
                [
                    {
                        "time": event["time"],
                        "kind": event["kind"],
                        "workflow_id": event["workflow_id"],
                        "stage_name": event["stage"],
                        "node_id": event["node_id"],
                        "message": event["message"],
                        "data": event["data"],
                    }
                    for event in self.events
                ],
            )
        self.session.commit()
        if self.kept is not None:
            self.kept.committed(self.session, self.stages)

    def after_commit(self, action: Callable[[], None]) -> None:
        """Call ``action`` once the transaction committed, before its messages are sent
        (never, if it fails)."""
        self.committed.append(action)

    def send(self, node_ids: Iterable[str], message: ToNode) -> None:
        """Send ``message`` to each of ``node_ids`` once the transaction commits."""
        self.outbox.extend((node_id, message) for node_id in node_ids)


def _plain_columns(mapper: Any) -> frozenset[str]:
    """The attributes of ``mapper`` that are one column of its table under the same name
    (what :meth:`Transaction.write_held` can write by name), worked out once a mapper."""
    plain = _PLAIN_COLUMNS.get(mapper)
    if plain is None:
        plain = _PLAIN_COLUMNS[mapper] = frozenset(
            prop.key
            for prop in mapper.column_attrs
            if len(prop.columns) == 1
            and isinstance(prop.columns[0], Column)
            and prop.columns[0].key == prop.key
        )
    return plain


#: :func:`_plain_columns` by mapper.
_PLAIN_COLUMNS: dict[Any, frozenset[str]] = {}


@event.listens_for(Session, "do_orm_execute")
def _runs_written_first(state: ORMExecuteState) -> None:
    """Before any statement of a session with :meth:`Transaction.write_run` writes or
    :meth:`Transaction.add_task_runs` inserts waiting (a load, a query, a flush's query):
    send them, so that it reads the runs as written; not before a read that cannot see
    them (:meth:`Transaction.read_past_writes`)."""
    waiting = state.session.info.get(_WRITES_RUNS)
    if waiting is not None and not state.execution_options.get(_PAST_WRITES):
        waiting.send_waiting()


@event.listens_for(Session, "before_flush")
def _held_written_first(session: Session, _context: Any, _instances: Any) -> None:
    """Before a flush of a session with writes waiting: send them, so that a later change
    of the same row, which the flush writes, is not overwritten by an earlier one."""
    waiting = session.info.get(_WRITES_RUNS)
    if waiting is not None:
        waiting.send_waiting()


class RunFields(Protocol):
    """What an assignment and its events are made of: a run's row, or what the pass knows
    of a run it placed without reading the row
    (:class:`~fuzzball_core.orchestrate.placement.Placed`)."""

    @property
    def id(self) -> int: ...
    @property
    def workflow_id(self) -> str: ...
    @property
    def stage_id(self) -> int: ...
    @property
    def task_id(self) -> int | None: ...
    @property
    def node_ids(self) -> list[str]: ...
    @property
    def cpus(self) -> dict[str, list[int]] | None: ...


def task_label(run: RunFields) -> str:
    """`` task N`` for a task of an array, nothing otherwise (for event messages)."""
    return f" task {run.task_id}" if run.task_id is not None else ""
