"""A test image running this machine's Python with aiohttp: the interpreter, the standard
library and site-packages modules a given script imports (found by importing it in a child
and listing ``sys.modules``), the shared libraries they load (``ldd``), and busybox, pushed
to a local registry. The endpoint tests' websocket and Server-Sent Events services run in it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

from support.mpi_image import _merged_usr_entries
from support.oci_pusher import Pusher, busybox_entries, directory, file, layer

#: lists every module file a script imports, without running its last line (the server)
_LIST_MODULES = r"""
import json, sys
source = open(sys.argv[1]).read().rsplit("\n", 2)[0]
sys.argv = [sys.argv[1], "0"]
exec(compile(source, "service", "exec"), {"__name__": "service"})
import encodings.idna, encodings.utf_8, encodings.latin_1, encodings.ascii
print(json.dumps(sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())})))
"""


def _module_files(script: Path) -> list[Path]:
    site = sysconfig.get_paths()["purelib"]
    listed = subprocess.run(
        [sys.executable, "-S", "-c", _LIST_MODULES, str(script)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": site},
    ).stdout
    return [Path(f) for f in json.loads(listed) if f]


def _libraries(paths: list[Path]) -> set[Path]:
    found: set[Path] = set()
    for path in paths:
        listing = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
        found.update(Path(m) for m in re.findall(r"(/\S+) \(0x", listing))
    return found


def push_python_image(registry_url: str, script: Path, repository: str) -> str:
    """Push ``REPOSITORY:latest`` running ``script`` as ``/opt/service.py`` with this
    Python and aiohttp; its ``docker://`` URI (the command is ``python3 -S
    /opt/service.py``, ``PYTHONPATH`` set in the image's config)."""
    interpreter = Path(sys.executable).resolve()
    modules = _module_files(script)
    shared = [p for p in modules if p.suffix == ".so"]
    libraries = _libraries([interpreter, *shared])
    contents = _merged_usr_entries(sorted({interpreter, *modules, *libraries}))
    service = [directory("opt"), file("opt/service.py", script.read_bytes())]
    pusher = Pusher(registry_url)
    try:
        pusher.push_image(
            repository,
            "latest",
            [layer(busybox_entries()), layer(contents), layer(service)],
            config_extra={
                "Cmd": [],
                "Env": [
                    f"PYTHONPATH={sysconfig.get_paths()['purelib']}",
                    "PATH=/usr/bin:/bin",
                ],
                "Entrypoint": [str(interpreter), "-S", "/opt/service.py"],
            },
        )
    finally:
        pusher.close()
    return f"docker://{repository}:latest"
