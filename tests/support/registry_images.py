"""What the image tests share besides fixtures: the pushed images and the private registry's
credentials (a module of its own: test modules import it by a name no other folder uses)."""

from __future__ import annotations

from dataclasses import dataclass

from support.oci_pusher import PushedImage

PRIVATE_USER = "alice"
PRIVATE_PASSWORD = "correct-horse-battery-staple"


@dataclass(frozen=True)
class SharedImages:
    """The images pushed into the shared registry."""

    single: PushedImage
    layered: PushedImage
    multi_index_digest: str
    multi_amd64: PushedImage
    multi_arm64: PushedImage
    arm_only: PushedImage
    hub_alpine: PushedImage
    docker_list_digest: str
    docker_amd64: PushedImage
