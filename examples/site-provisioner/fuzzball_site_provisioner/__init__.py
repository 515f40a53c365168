"""``site-batch``: Fuzzball nodes started as jobs of a site's batch system.

Each instance is one batch job that boots a Substrate from the instance's user data. The
site says how to submit and cancel in the definition's ``config``::

    driver: site-batch
    config:
      state-dir: /var/lib/fuzzball/site-batch
      submit: sbatch --parsable --job-name {name} /opt/site/fuzzball-node.sh {user_data}
      cancel: scancel {job_id}

``submit`` must print the batch job's id on its last line of output; ``{user_data}`` is a
file (mode 0600) holding the instance's user data, ``{name}`` the node name it registers
under. ``cancel`` gets ``{job_id}``. See this package's README for the driver contract.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fuzzball_core.drivers import InstanceSpec, Launch, ProvisionedInstance, Provisioner
from fuzzball_core.errors import InvalidArgument, Unavailable
from fuzzball_core.vocabulary import InstanceState

__all__ = ["BatchProvisioner"]


def _run(template: str, **values: str) -> str:
    words = [word.format(**values) for word in shlex.split(template)]
    try:
        done = subprocess.run(words, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"site-batch: {words[0]} could not run: {exc}") from None
    if done.returncode != 0:
        raise Unavailable(f"site-batch: {words[0]} exited {done.returncode}")
    return done.stdout


class BatchProvisioner(Provisioner):
    """Nodes as batch jobs: ``submit`` per instance, ``cancel`` to delete it."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self._settings: dict[str, Mapping[str, Any]] = {}

    def check_definition(self, definition: InstanceSpec) -> None:
        """``state-dir``, ``submit`` and ``cancel`` are required."""
        for key in ("state-dir", "submit", "cancel"):
            if not definition.driver_config.get(key):
                raise InvalidArgument(
                    f"provisioner definition {definition.definition}: {key} is required"
                    " (site-batch)"
                )
        self._settings[definition.definition] = definition.driver_config

    def _jobs(self, state: Path) -> dict[str, dict[str, str]]:
        path = state / "jobs.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def _state_dirs(self) -> list[Path]:
        return sorted({Path(str(s["state-dir"])) for s in self._settings.values()})

    def create(
        self,
        definition: InstanceSpec,
        launches: Sequence[Launch],
        *,
        annotations: Mapping[str, str],
        ttl: float | None = None,
        directives: Mapping[str, str] | None = None,
    ) -> Sequence[ProvisionedInstance]:
        """Submit one batch job per launch."""
        self.check_definition(definition)
        settings = definition.driver_config
        state = Path(str(settings["state-dir"]))
        state.mkdir(parents=True, exist_ok=True)
        made = []
        for launch in launches:
            user_data = state / f"{launch.name}.user-data"
            descriptor = os.open(user_data, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as out:
                out.write(launch.user_data)
            output = _run(str(settings["submit"]), name=launch.name, user_data=str(user_data))
            lines = output.strip().splitlines()
            if not lines:
                raise Unavailable("site-batch: submit printed no job id")
            job_id = lines[-1].strip()
            jobs = self._jobs(state)
            jobs[launch.name] = {"job": job_id, "definition": definition.definition}
            (state / "jobs.json").write_text(json.dumps(jobs))
            made.append(ProvisionedInstance(launch.name, launch.name, definition.definition))
        return made

    def delete(self, instance_id: str) -> None:
        """Cancel the instance's batch job (once: it is forgotten after)."""
        for state in self._state_dirs():
            jobs = self._jobs(state)
            job = jobs.pop(instance_id, None)
            if job is None:
                continue
            cancel = str(self._settings[job["definition"]]["cancel"])
            _run(cancel, job_id=job["job"])
            (state / "jobs.json").write_text(json.dumps(jobs))
            (state / f"{instance_id}.user-data").unlink(missing_ok=True)

    def describe(self, instance_id: str) -> ProvisionedInstance | None:
        """The instance while its job is known."""
        for state in self._state_dirs():
            job = self._jobs(state).get(instance_id)
            if job is not None:
                return ProvisionedInstance(
                    instance_id, instance_id, job["definition"], InstanceState.CREATED
                )
        return None

    def list_instances(self) -> Sequence[ProvisionedInstance]:
        """Every instance whose job is known."""
        found = []
        for state in self._state_dirs():
            for name, job in self._jobs(state).items():
                created = InstanceState.CREATED
                found.append(ProvisionedInstance(name, name, job["definition"], created))
        return found
