"""Builtin storage drivers (entry-point group ``fuzzball.storage_drivers``): ``hostpath``
(a tree every node sees), ``local`` (node-local persistent volumes) and ``ephemeral``
(per-workflow directories on each node)."""
