"""A workflow's stage graph laid out for the detail page's SVG (drawn server-side: no script).

The boxes are the workflow's stored stages; the edges come from planning its file again
(``spec.plan_workflow`` with pull stages, as the engine plans it): dependencies between
steps (with their condition), the image each step or build waits for, and the volumes it
mounts. Columns are the longest path from a stage without dependencies, so every edge runs
left to right.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.service.views import StageView, WorkflowView
from fuzzball_core.spec import Condition, parse_workflow, plan_workflow
from fuzzball_core.vocabulary import StageKind

BOX_WIDTH = 200
BOX_HEIGHT = 46
COLUMN_GAP = 70
ROW_GAP = 18
MARGIN = 10
#: longest label drawn in a box; the full name is the box's tooltip
LABEL_CHARACTERS = 26


@dataclass(frozen=True)
class Box:
    """One stage, where it is drawn."""

    stage: StageView
    x: int
    y: int
    label: str

    @property
    def status_class(self) -> str:
        """The CSS class colouring the box by the stage's status."""
        return f"status-{self.stage.status.lower()}"


@dataclass(frozen=True)
class Arrow:
    """One edge: ``kind`` is ``image``, ``volume`` or ``dependency``; ``path`` an SVG path."""

    source: str
    target: str
    kind: str
    condition: str
    path: str


@dataclass(frozen=True)
class StageGraph:
    """The boxes and arrows of a workflow, and the drawing's size."""

    boxes: tuple[Box, ...]
    arrows: tuple[Arrow, ...]
    width: int
    height: int


def stage_graph(workflow: WorkflowView) -> StageGraph:
    """Lay out ``workflow``'s stages (those of kind ``workflow`` left out: the page is it)."""
    stages = [s for s in workflow.stages if s.kind != StageKind.WORKFLOW]
    names = {s.name for s in stages}
    edges = [e for e in _planned_edges(workflow.raw_specification) if {e[0], e[1]} <= names]
    column = _columns([s.name for s in stages], edges)
    rows: dict[int, int] = {}
    boxes: dict[str, Box] = {}
    for stage in stages:
        col = column[stage.name]
        row = rows.get(col, 0)
        rows[col] = row + 1
        x = MARGIN + col * (BOX_WIDTH + COLUMN_GAP)
        y = MARGIN + row * (BOX_HEIGHT + ROW_GAP)
        boxes[stage.name] = Box(stage, x, y, _label(stage))
    arrows = tuple(
        Arrow(source, target, _edge_kind(source), condition, _path(boxes[source], boxes[target]))
        for source, target, condition in edges
    )
    width = MARGIN * 2 + (max(column.values(), default=0) + 1) * (BOX_WIDTH + COLUMN_GAP)
    height = MARGIN * 2 + max(rows.values(), default=0) * (BOX_HEIGHT + ROW_GAP)
    return StageGraph(tuple(boxes.values()), arrows, width - COLUMN_GAP, height - ROW_GAP)


def _planned_edges(raw_specification: str) -> list[tuple[str, str, str]]:
    """(source, target, condition) of the file's plan; none if the file no longer reads (a
    plugin validator that accepted it is gone): the boxes are still worth showing."""
    if not raw_specification:
        return []
    try:
        plan = plan_workflow(parse_workflow(raw_specification), pull_stages=True)
    except InvalidArgument:
        return []
    return [(e.source, e.target, Condition(e.condition).value) for e in plan.edges]


def _columns(names: list[str], edges: list[tuple[str, str, str]]) -> dict[str, int]:
    """Each stage's column: one past the furthest of the stages it waits for."""
    incoming: dict[str, list[str]] = {name: [] for name in names}
    for source, target, _ in edges:
        incoming[target].append(source)
    column: dict[str, int] = {}

    def place(name: str, seen: frozenset[str]) -> int:
        if name not in column:
            # a plan has no cycles; ``seen`` only guards against a file planned differently
            sources = [s for s in incoming[name] if s not in seen]
            column[name] = 1 + max((place(s, seen | {name}) for s in sources), default=-1)
        return column[name]

    for name in names:
        place(name, frozenset())
    return column


def _edge_kind(source: str) -> str:
    if source.startswith("images."):
        return "image"
    if source.startswith("volumes."):
        return "volume"
    return "dependency"


def _label(stage: StageView) -> str:
    """The stage's name without its section (the box's kind says it), shortened to fit."""
    label = stage.name.split(".", 1)[1] if "." in stage.name else stage.name
    if len(label) > LABEL_CHARACTERS:
        label = label[: LABEL_CHARACTERS - 1] + "…"
    return label


def _path(source: Box, target: Box) -> str:
    """A curve from the right edge of ``source`` to the left edge of ``target``; one that
    passes over a column runs in the gap above the boxes, so that it crosses none of them."""
    x1, y1 = source.x + BOX_WIDTH, source.y + BOX_HEIGHT // 2
    x2, y2 = target.x, target.y + BOX_HEIGHT // 2
    if x2 - x1 <= COLUMN_GAP:
        bend = (x2 - x1) // 2
        return f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"
    lane = min(source.y, target.y) - ROW_GAP // 2
    turn, half = COLUMN_GAP // 2, COLUMN_GAP // 4
    return (
        f"M{x1},{y1} C{x1 + half},{y1} {x1 + half},{lane} {x1 + turn},{lane} "
        f"L{x2 - turn},{lane} C{x2 - half},{lane} {x2 - half},{y2} {x2},{y2}"
    )
