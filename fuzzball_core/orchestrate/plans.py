"""Parsed plans of the workflows in flight, and what each stage's runs carry to nodes.

A workflow's plan is derived from its stored v4 definition, so it is parsed again after a
restart; the payloads (``job_json``, ``volume_ingress_json``) and the image pins of its
stages are worked out once and kept with it until the workflow ends.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.drivers import ResolvedImage
from fuzzball_core.errors import InvalidArgument, NotFound
from fuzzball_core.orchestrate import egress_stage, image_stages
from fuzzball_core.orchestrate.image_stages import ImageStages
from fuzzball_core.orchestrate.requests import job_payload, volume_ingress_json
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.spec import (
    ImagePull,
    Job,
    ParsedWorkflow,
    Plan,
    Service,
    StageKind,
    parse_workflow,
)
from fuzzball_core.spec import Stage as PlanStage
from fuzzball_core.spec.models import ImageBuild
from fuzzball_core.store.models import Event, Workflow
from fuzzball_core.vocabulary import EventKind


@dataclass
class PlanEntry:
    """A workflow's parsed definition and plan, with what was derived from them so far."""

    parsed: ParsedWorkflow
    plan: Plan
    payloads: dict[str, str] = field(default_factory=dict)
    #: digests the pull stages' images were pinned to at submission, by stage id
    pins: dict[str, ResolvedImage] | None = None


class Plans:
    """The plans of workflows in flight, by workflow id."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions
        #: image stages: off until Orchestrate configures them (``configure_images``)
        self.images = ImageStages()
        self._entries: dict[str, PlanEntry] = {}

    def plan(self, parsed: ParsedWorkflow) -> Plan:
        """The plan of a parsed workflow, with pull stages when image stages are on."""
        return parsed.plan(pull_stages=self.images.enabled)

    def add(
        self, workflow_id: str, parsed: ParsedWorkflow, plan: Plan, pins: dict[str, ResolvedImage]
    ) -> None:
        """Keep a just-submitted workflow's plan (saves parsing its definition again)."""
        self._entries[workflow_id] = PlanEntry(parsed, plan, pins=pins)

    def forget(self, workflow_id: str) -> None:
        """Drop an ended workflow's plan."""
        self._entries.pop(workflow_id, None)

    def entry(self, workflow: Workflow) -> PlanEntry:
        """The workflow's plan entry, parsing its stored definition the first time."""
        entry = self._entries.get(workflow.id)
        if entry is None:
            parsed = parse_workflow(workflow.definition_v4, source=f"workflow {workflow.id}")
            entry = PlanEntry(parsed, self.plan(parsed))
            self._entries[workflow.id] = entry
        return entry

    def plan_of(self, workflow_id: str) -> Plan | None:
        """The plan of a workflow (None if it does not exist)."""
        cached = self._entries.get(workflow_id)
        if cached is not None:
            return cached.plan
        with self.sessions() as session:  # an ended workflow: parse, but keep nothing
            workflow = session.get(Workflow, workflow_id)
            if workflow is None:
                return None
            return self.plan(parse_workflow(workflow.definition_v4))

    def run_definition(self, workflow: Workflow, stage_name: str) -> Any:
        """What the scheduler and the retry rules see of a stage's runs."""
        planned = self.entry(workflow).plan.stages[stage_name]
        if planned.kind is StageKind.IMAGE:
            return image_stages.image_run_definition()
        if planned.kind is StageKind.FILE:
            return egress_stage.run_definition(planned.name)
        return planned.definition

    # -- payloads ------------------------------------------------------------------------------

    def payload(self, tx: Transaction, workflow: Workflow, stage_name: str) -> str:
        """The ``job_json`` a run of the stage carries."""
        entry = self.entry(workflow)
        payload = entry.payloads.get(stage_name)
        if payload is None:
            payload = self._new_payload(tx, workflow, entry, entry.plan.stages[stage_name])
            entry.payloads[stage_name] = payload
        return payload

    def _new_payload(
        self, tx: Transaction, workflow: Workflow, entry: PlanEntry, planned: PlanStage
    ) -> str:
        definition = planned.definition
        if planned.kind is StageKind.FILE:
            return egress_stage.payload(planned.name, definition)
        if isinstance(definition, ImagePull):
            return self.images.pull_payload(
                definition, self._pins(tx, workflow, entry).get(planned.id), workflow.account_id
            )
        if isinstance(definition, ImageBuild):
            from_digest = self.image_digest(tx, workflow, str(definition.from_.uri))
            return self.images.build_payload(
                planned.name,
                definition,
                workflow.account_id,
                from_digest,
                image_stages.definition_hash(definition, from_digest),
            )
        payload = job_payload(definition, entry.parsed.model.files)
        uri = str(definition.image.uri)
        digest = self.image_digest(tx, workflow, uri) if self.images.enabled else ""
        if digest:
            # every run of the workflow runs the image its submission pinned, on any node
            # however late (a tag moved since is not followed), fetched by digest; and the
            # node cannot tell whose fuzzball://user/... this is
            document = json.loads(payload)
            document["image"]["uri"] = image_stages.pinned_uri(uri, digest)
            payload = json.dumps(document, separators=(",", ":"))
        return payload

    def ingress(self, workflow: Workflow, stage_name: str) -> str:
        """The assignment's ``volume_ingress_json`` for a job or service stage."""
        entry = self.entry(workflow)
        key = f"{stage_name}#ingress"
        if key not in entry.payloads:
            definition = entry.plan.stages[stage_name].definition
            entry.payloads[key] = (
                volume_ingress_json(definition, entry.parsed.model.volumes)
                if isinstance(definition, Job | Service)
                else ""
            )
        return entry.payloads[key]

    # -- image pins ----------------------------------------------------------------------------

    def _pins(
        self, tx: Transaction, workflow: Workflow, entry: PlanEntry
    ) -> dict[str, ResolvedImage]:
        """The submission's pins (read back from its ``image_resolved`` events after a
        restart)."""
        if entry.pins is None:
            entry.pins = {}
            resolved = tx.session.scalars(
                select(Event).where(
                    Event.workflow_id == workflow.id, Event.kind == EventKind.IMAGE_RESOLVED
                )
            )
            for event in resolved:
                data = event.data or {}
                entry.pins[str(event.stage_name)] = ResolvedImage(
                    str(data.get("uri", "")),
                    str(data.get("digest", "")),
                    int(data.get("size", 0)),
                    str(data.get("platform", "")),
                )
        return entry.pins

    def image_digest(self, tx: Transaction, workflow: Workflow, uri: str) -> str:
        """The digest ``uri`` is pinned to: its pull stage's, or the object cache's now."""
        pin = self._pins(tx, workflow, self.entry(workflow)).get(f"images.{uri}")
        if pin is not None:
            return pin.digest
        if image_stages.is_object_cache_uri(uri):
            with contextlib.suppress(NotFound, InvalidArgument):
                return self.images.resolve(uri, workflow.account_id).digest
        return ""
