"""A SIF image's Apptainer environment scripts, sourced before a job's command as
``apptainer exec`` and ``apptainer run`` source them.

Apptainer starts every command through ``/.singularity.d/actions/exec`` (or ``run``): a
POSIX shell script that sources ``/.singularity.d/env/*.sh`` in name order (the image's
``%environment`` is 90-environment.sh, a docker base's Env 10-docker2singularity.sh, a
build's ``$SINGULARITY_ENVIRONMENT`` 91-environment.sh...) and then ``exec``\\ s the command,
the variables the user passed (``--env``, ``APPTAINERENV_*``) winning over the scripts'.

A job whose image has such scripts (:attr:`ImageConfig.env_scripts`, found by the oras
backend in the unpacked tree) runs the same way: its command becomes the image's
``/bin/sh`` running :data:`WRAPPER`, which sources the scripts, exports the job's own
variables again (its ``env``, the ``FB_*`` ones, secrets, devices' and ranks': whatever
the platform or the job set, not the image) and ``exec``\\ s the command. The wrapper's
argv names those variables, never their values: it copies each one's value, as the
environment gave it, into a shell variable before sourcing and exports it back from there
afterwards, so a value with spaces, newlines or quotes survives and no value is ever shell
source (nor in the argv anyone on the node can read). An image without ``/bin/sh`` runs
without its scripts, a warning event of its run saying which were not applied
(:func:`not_applied_notice`); a SIF converted before the scripts were looked for runs
without them too, a warning event saying so (:func:`not_looked_for_notice`). Every other
image is untouched: no wrapper, no shell.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fuzzball_core.drivers import ImageConfig

#: the shell that sources the scripts (Apptainer's actions are ``#!/bin/sh`` scripts)
SHELL = "/bin/sh"
#: the wrapper's ``$0`` (what ``ps`` shows until it ``exec``\\ s the command)
WRAPPER_NAME = "fuzzball-apptainer-env"
#: ends the variable names in the wrapper's arguments; the command follows
END_OF_NAMES = "--"
#: what a shell can export: other names cannot be set by the scripts either, and pass as
#: they are
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: ``sh -c WRAPPER NAME0 VAR... -- COMMAND...``. The names are checked identifiers, so the
#: ``eval``\\ s below only ever see names; values move by parameter expansion alone. Each
#: variable set when the shell starts is copied to ``__fb_keep_NAME`` and its export added
#: to ``__fb_restore``; the scripts are sourced in glob order (as Apptainer's actions do,
#: with the command as ``$@``); the copies are exported back, and the command replaces the
#: shell.
WRAPPER = """\
__fb_restore=
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
  if eval "[ -n \\"\\${$1+set}\\" ]"; then
    eval "__fb_keep_$1=\\"\\$$1\\""
    __fb_restore="$__fb_restore export $1=\\"\\$__fb_keep_$1\\";"
  fi
  shift
done
[ "$#" -gt 0 ] && shift
for __fb_script in /.singularity.d/env/*.sh; do
  if [ -f "$__fb_script" ]; then
    . "$__fb_script"
  fi
done
eval "$__fb_restore"
exec "$@"
"""


def sourcing_env_scripts(command: list[str], keep: Iterable[str]) -> list[str]:
    """The argv that runs ``command`` after the image's environment scripts, the variables
    named in ``keep`` exported again over whatever the scripts set (those the container's
    environment has). Names a shell cannot export are left out: the scripts cannot set
    them, and whether they reach the command is the image's shell's business (dash and
    BusyBox drop them)."""
    names = sorted({name for name in keep if _SHELL_NAME.fullmatch(name)})
    return [SHELL, "-c", WRAPPER, WRAPPER_NAME, *names, END_OF_NAMES, *command]


def not_looked_for_notice(uri: str) -> str:
    """What a run's warning event says when its SIF image's kept config predates the looking for
    environment scripts (the node, or the object cache, converted it earlier)."""
    return (
        f"{uri} was converted before its Apptainer environment scripts were looked for: any "
        f"in /.singularity.d/env are not applied to this run (they are once the image is "
        f"pulled and converted again)"
    )


def not_applied_notice(config: ImageConfig) -> str:
    """What a run's warning event says when its image has environment scripts but no
    shell to source them with."""
    return (
        f"the image's Apptainer environment scripts "
        f"({', '.join(config.env_scripts or ())} in /.singularity.d/env) were not applied: the "
        f"image has no {SHELL} to source them with; the command runs with the image's Env "
        f"and the job's env only"
    )
