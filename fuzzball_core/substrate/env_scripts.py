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
source (nor in the argv anyone on the node can read). The device plugins' directories
(``/usr/local/nvidia/lib64`` on ``LD_LIBRARY_PATH``, :attr:`ContainerPreparation.search_paths`)
are appended again after the scripts, each unless already there, as Apptainer appends its
``--nv`` library directory after sourcing: a script that sets ``LD_LIBRARY_PATH`` outright
would otherwise drop the driver's libraries. They reach the wrapper the same way, in
environment variables (:func:`search_path_carriers`) that its argv names and that it unsets
before sourcing, so neither the scripts nor the command see them. An image without ``/bin/sh`` runs
without its scripts, a warning event of its run saying which were not applied
(:func:`not_applied_notice`); a SIF converted before the scripts were looked for runs
without them too, a warning event saying so (:func:`not_looked_for_notice`). Every other
image is untouched: no wrapper, no shell.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

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

#: the prefix of the environment variables that carry to the wrapper the directories a
#: path-list variable must still hold after the scripts (``__fb_search_LD_LIBRARY_PATH``:
#: ``:``-separated); the wrapper copies and unsets them before sourcing
CARRIER_PREFIX = "__fb_search_"

#: ``sh -c WRAPPER NAME0 VAR... -- PATHVAR... -- COMMAND...``. The names are checked
#: identifiers, so the ``eval``\\ s below only ever see names; values move by parameter
#: expansion alone. Each ``VAR`` set when the shell starts is copied to ``__fb_keep_VAR``
#: and its export added to ``__fb_restore``; each ``PATHVAR``'s directories are copied from
#: its carrier to ``__fb_dirs_PATHVAR``, the carrier unset, and a call of ``__fb_add`` added
#: to ``__fb_extend``. The scripts are sourced in glob order (as Apptainer's actions do, with
#: the command as ``$@``); the copies are exported back; each directory missing from its
#: variable's entries is appended (``__fb_add`` is defined only then, so no script redefines
#: it; ``eval`` of the calls, not a loop over words, so a script's ``IFS`` does not matter);
#: and the command replaces the shell.
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
__fb_extend=
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
  eval "__fb_dirs_$1=\\"\\${__fb_search_$1-}\\""
  unset "__fb_search_$1"
  __fb_extend="$__fb_extend __fb_add $1;"
  shift
done
[ "$#" -gt 0 ] && shift
for __fb_script in /.singularity.d/env/*.sh; do
  if [ -f "$__fb_script" ]; then
    . "$__fb_script"
  fi
done
eval "$__fb_restore"
__fb_add() {
  eval "__fb_list=\\"\\${$1-}\\"; __fb_rest=\\"\\$__fb_dirs_$1\\""
  while [ -n "$__fb_rest" ]; do
    __fb_dir=${__fb_rest%%:*}
    case $__fb_rest in
      *:*) __fb_rest=${__fb_rest#*:} ;;
      *) __fb_rest= ;;
    esac
    case :$__fb_list: in
      *:"$__fb_dir":*) ;;
      *) __fb_list=${__fb_list:+$__fb_list:}$__fb_dir ;;
    esac
  done
  if [ -n "$__fb_list" ]; then
    eval "export $1=\\"\\$__fb_list\\""
  fi
}
eval "$__fb_extend"
exec "$@"
"""


def sourcing_env_scripts(
    command: list[str],
    keep: Iterable[str],
    search_paths: Mapping[str, Iterable[str]] | None = None,
) -> list[str]:
    """The argv that runs ``command`` after the image's environment scripts, the variables
    named in ``keep`` exported again over whatever the scripts set (those the container's
    environment has), then the directories of ``search_paths`` (the device plugins') appended
    to their variables where missing; the container's environment must have
    :func:`search_path_carriers` of the same ``search_paths``. Names a shell cannot export
    are left out: the scripts cannot set them, and whether they reach the command is the
    image's shell's business (dash and BusyBox drop them)."""
    names = sorted({name for name in keep if _SHELL_NAME.fullmatch(name)})
    carriers = search_path_carriers(search_paths or {})
    path_names = sorted(name.removeprefix(CARRIER_PREFIX) for name in carriers)
    return [
        SHELL,
        "-c",
        WRAPPER,
        WRAPPER_NAME,
        *names,
        END_OF_NAMES,
        *path_names,
        END_OF_NAMES,
        *command,
    ]


def search_path_carriers(search_paths: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """The environment variables that carry each path-list variable's directories to the
    wrapper (``__fb_search_PATH=/usr/local/nvidia/bin``): each directory once, none empty
    or with a ``:`` (which no path list can hold), a variable a shell cannot export left
    out."""
    carriers = {}
    for name, directories in search_paths.items():
        kept = [d for d in dict.fromkeys(directories) if d and ":" not in d]
        if kept and _SHELL_NAME.fullmatch(name):
            carriers[f"{CARRIER_PREFIX}{name}"] = ":".join(kept)
    return carriers


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
