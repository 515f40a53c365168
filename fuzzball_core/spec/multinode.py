"""What a multinode job's ``implementation`` decides that the submission must know too.

Substrate starts an Open MPI job's ranks through Open MPI's own launcher and sets some of its
settings itself (``fuzzball_core.substrate.openmpi``); the submission warns about a job's
``env`` entry naming one of them (``fuzzball_core.spec.fields``). Both read the names here.
"""

from __future__ import annotations

from fuzzball_core.spec.models import Job, Service

#: ``multinode.implementation`` values whose ranks Open MPI's launcher (``mpirun``) starts.
OPEN_MPI = frozenset({"openmpi", "ompi"})
#: Open MPI's remote agent: Fuzzball's, through which ``mpirun`` reaches the other parts.
OPEN_MPI_AGENT_ENV = "OMPI_MCA_plm_rsh_agent"
#: Whether daemons launch further daemons: never, as only part 0 reads what the agent writes.
OPEN_MPI_TREE_SPAWN_ENV = "OMPI_MCA_plm_rsh_no_tree_spawn"
#: The variables an Open MPI job's launch sets whatever the job or its image says.
OPEN_MPI_LAUNCH_ENV = (OPEN_MPI_AGENT_ENV, OPEN_MPI_TREE_SPAWN_ENV)


def is_open_mpi(step: Job | Service) -> bool:
    """Whether ``step`` is a multinode job (or service) whose ranks Open MPI's launcher
    starts (no implementation is MPICH's)."""
    return step.multinode is not None and step.multinode.implementation in OPEN_MPI
