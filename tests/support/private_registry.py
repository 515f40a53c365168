"""A registry that requires basic authentication (Debian's docker-registry with htpasswd),
holding ``private/app:1`` (busybox), pushed with the credentials of ``registry_images``."""

from __future__ import annotations

from pathlib import Path

import bcrypt

from support.oci_pusher import Pusher, busybox_entries, layer
from support.registry_images import PRIVATE_PASSWORD, PRIVATE_USER
from support.registry_server import RegistryServer

#: the private image's repository and tag
PRIVATE_IMAGE = "private/app:1"


def start_private_registry(workdir: Path) -> RegistryServer:
    """Start the private registry in ``workdir`` (htpasswd with a bcrypt entry) and push
    :data:`PRIVATE_IMAGE`; the caller kills it."""
    htpasswd = workdir / "htpasswd"
    hashed = bcrypt.hashpw(PRIVATE_PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    htpasswd.write_text(f"{PRIVATE_USER}:{hashed}\n")
    server = RegistryServer(workdir, htpasswd=htpasswd)
    server.start()
    pusher = Pusher(server.url, auth=(PRIVATE_USER, PRIVATE_PASSWORD))
    try:
        repository, tag = PRIVATE_IMAGE.split(":")
        pusher.push_image(repository, tag, [layer(busybox_entries())])
    except BaseException:
        server.kill()
        raise
    finally:
        pusher.close()
    return server
