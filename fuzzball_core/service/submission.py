"""Reading a submitted workflow as the API receives it: the file's text or a definition."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.spec import ParsedWorkflow, parse_workflow
from fuzzball_core.spec.parsed_files import ParsedFiles


def read_submission(
    raw_specification: str | None,
    definition: Mapping[str, Any] | None,
    source: str,
    registry: PluginRegistry | None,
    files: ParsedFiles | None = None,
) -> tuple[ParsedWorkflow, str]:
    """Parse and validate (plugin validators included) exactly one of ``raw_specification``
    (sent unchanged) or ``definition``; return the model and the text that was parsed.
    With ``files``, a text parsed before is not parsed again (the validators still run)."""
    if (raw_specification is None) == (definition is None):
        raise InvalidArgument("give exactly one of rawSpecification or definition")
    if raw_specification is None:
        if not isinstance(definition, Mapping):
            raise InvalidArgument("definition: must be an object")
        raw_specification = yaml.safe_dump(dict(definition), sort_keys=False)
    validators = registry.workflow_validators(source) if registry else []
    if files is not None:
        parsed = files.parse(raw_specification, source=source, extra_validators=validators)
    else:
        parsed = parse_workflow(raw_specification, source=source, extra_validators=validators)
    return parsed, raw_specification
