"""The default scheduler's walk over a plain queue in C: runs of one-node jobs placed by one call.

A pass over the scheduler's copy of a plain queue (one account, or fair share off; the copy's
order) used to take one Python step per job it did not pass over, and most of those steps
placed a one-node job by one C call (``fi_place``) or found the job's shape settled.
:class:`QueueRuns` keeps, in C, what those steps decide per shape object: the shapes whose
jobs are placed by ``fi_place`` over their plan (learnt when the Python pass placed one of
them so, kept between passes), this pass's settled shapes (passed over), and its blocked ones
(their key has no room, is infeasible, or is refused by the reservation): the first job of a
blocked shape met settles it, the Python pass writing its answer from what the walk noted.
``fi_place_run`` walks the queue (the copy's ``fi_queue``) from a position, placing, passing
over and noting such jobs, until a job the Python pass must look at; the pass records the
jobs placed and noted, looks at that job, and resumes after it.
"""

from __future__ import annotations

from typing import Any

from fuzzball_plugins.schedulers._free_index import ffi, lib

#: a shape whose jobs the pass passes over (see fi_run_flag)
SETTLED = 1
#: a shape whose key has no room or is infeasible: settled at its next job (see fi_run_flag)
BLOCKED = 2
#: a shape whose key the reservation refuses: settled at its next job the reservation guards
REFUSED = 8

#: shapes the table holds at most: past it, it is forgotten and learnt again
BOUND = 4096


class QueueRuns:
    """The C table of a queue's shapes, and the shape objects it names kept alive (their ids
    are its keys: a shape's id is not reused while it lives)."""

    __slots__ = ("_blocked", "_bound", "_by_key", "_held", "_run", "out", "settled", "stop")

    def __init__(self, room: int = 1024) -> None:
        self._run = ffi.gc(lib.fi_run_new(), lib.fi_run_free)
        if self._run == ffi.NULL:
            raise MemoryError("no memory for the queue runs' table")
        #: id(a shape) -> (that shape, its plan's arrays): held while the table names it
        self._held: dict[int, tuple[Any, Any]] = {}
        #: the shape a pass answers for -> the ids of the shapes answered by it
        self._by_key: dict[Any, list[int]] = {}
        #: this pass's blocked keys -> their flags
        self._blocked: dict[Any, int] = {}
        #: what one walk writes: five ints per placed job, two per job settling its shape,
        #: and where it stopped
        self.out = ffi.new("int32_t[]", 5 * room)
        self.settled = ffi.new("int32_t[]", 2 * room)
        self.stop = ffi.new("int32_t[7]")
        self._bound: tuple[Any, ...] = ()

    @property
    def room(self) -> int:
        """How many jobs one walk places at most."""
        return len(self.out) // 5

    def clear(self) -> None:
        """Forget every shape (the plans or the shapes' keys changed)."""
        lib.fi_run_clear(self._run)
        self._held.clear()
        self._by_key.clear()

    def note(self, shape: Any, key: Any) -> None:
        """Jobs of ``shape`` (the object) are answered by ``key``: they stop the walk, until
        the shape is placed by it (:meth:`place`) or settled; :meth:`block` of ``key`` has the
        walk settle it. Nothing when the table knows the shape."""
        if id(shape) in self._held:
            return
        if len(self._held) >= BOUND:
            self.clear()
        self._flag(id(shape), self._blocked.get(key, 0))
        self._held[id(shape)] = (shape, None)
        self._by_key.setdefault(key, []).append(id(shape))

    def _flag(self, shape_id: int, flags: int) -> None:
        if lib.fi_run_flag(self._run, shape_id, flags):
            raise MemoryError("no memory for the queue runs' table")

    def placing(self, shape: Any) -> bool:
        """Whether the walk places jobs of ``shape`` (the object)."""
        held = self._held.get(id(shape))
        return held is not None and held[1] is not None

    def place(
        self,
        shape: Any,
        key: Any,
        classes: Any,
        cores: int,
        memory: int,
        usage: int,
        plan: int,
    ) -> None:
        """Jobs of ``shape`` (noted) are placed by ``fi_place`` over ``classes`` (a plan's
        :class:`~.node_index.ClassList`), the shape the pass answers being ``key``."""
        if lib.fi_run_set(
            self._run,
            id(shape),
            classes.classes,
            classes.needs,
            classes.count,
            classes.numbers,
            cores,
            memory,
            usage,
            plan,
        ):
            raise MemoryError("no memory for the queue runs' table")
        self._held[id(shape)] = (shape, classes)

    def settle(self, shape_id: int) -> None:
        """Jobs of the shape of id ``shape_id`` are passed over for the rest of the pass (or
        until :meth:`unsettle`)."""
        self._flag(shape_id, SETTLED)

    def block(self, key: Any, refused: bool = False) -> None:
        """The shapes answered by ``key`` are settled at their next job for the rest of the
        pass (``refused``: at their next job the reservation guards), as the pass settles
        them: ``key`` has no room or is infeasible, or (``refused``) the reservation keeps
        its room."""
        flag = REFUSED if refused else BLOCKED
        self._blocked[key] = self._blocked.get(key, 0) | flag
        shape_ids = self._by_key.get(key)
        if shape_ids and lib.fi_run_flag_many(self._run, shape_ids, len(shape_ids), flag):
            raise MemoryError("no memory for the queue runs' table")

    def unsettle(self) -> None:
        """No shape is settled (the reservation was made: the pass's table was emptied)."""
        lib.fi_run_unflag(self._run, SETTLED)

    def start_pass(self) -> None:
        """No shape is settled or blocked."""
        lib.fi_run_unflag(self._run, SETTLED | BLOCKED | REFUSED)
        self._blocked.clear()

    def bind(self, book: Any, ends: Any, queue: Any, full: Any) -> None:
        """The walks (``fi_place_run`` on :attr:`table`) place on ``book`` and list ends in
        ``ends``, walk ``queue`` (a queue copy's ``fi_queue``) and read and raise ``full``
        (the pass's counts by plan number), until bound again."""
        # held: the C side keeps only their addresses
        self._bound = (book, ends, queue, full)
        lib.fi_run_bind(
            self._run, book, ends, queue, full, self.out, self.settled, self.room, self.stop
        )

    def rebind_full(self, full: Any) -> None:
        """The pass's counts by plan number moved to ``full`` (grown) while bound."""
        if self._bound:
            book, ends, queue, _ = self._bound
            self.bind(book, ends, queue, full)

    @property
    def table(self) -> Any:
        """The C table (what ``fi_place_run`` walks with)."""
        return self._run
