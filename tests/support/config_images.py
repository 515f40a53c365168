"""Images whose config sets Env, Entrypoint, Cmd, WorkingDir and User, built from busybox at
test time and pushed to a test registry (the node and end-to-end tests run them)."""

from __future__ import annotations

from typing import Any

from support.oci_pusher import Entry, Pusher, busybox_entries, directory, file, layer

#: the users and groups of every config image: ``app`` (1000) is in ``staff`` and ``audio``
PASSWD = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:the app:/home/app:/bin/sh\n"
GROUP = "root:x:0:\napp:x:1000:\naudio:x:29:app\nstaff:x:50:app\n"
#: the repository prefix config images are pushed under (``docker://cfg/NAME:1``)
PREFIX = "cfg"


def user_entries() -> list[Entry]:
    """Busybox with /etc/passwd and /etc/group, and ``app``'s home directory."""
    return [
        *busybox_entries(),
        file("etc/passwd", PASSWD.encode()),
        file("etc/group", GROUP.encode()),
        directory("home"),
        directory("home/app", uid=1000, gid=1000),
    ]


def push_config_image(registry_url: str, name: str, config: dict[str, Any]) -> str:
    """Push ``cfg/NAME:1`` whose config is exactly ``config`` (unset fields stay unset, the
    pusher's default Cmd and Env included); its URI through the docker.io mirror."""
    unset = {"Cmd": None, "Env": None}
    pusher = Pusher(registry_url)
    try:
        pusher.push_image(
            f"{PREFIX}/{name}", "1", [layer(user_entries())], config_extra=unset | config
        )
    finally:
        pusher.close()
    return f"docker://{PREFIX}/{name}:1"
