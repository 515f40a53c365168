"""Image backends: pull container images from OCI registries and hand the node an EROFS file.

``docker://`` images come through :class:`~fuzzball_plugins.images.docker_backend.DockerBackend`
and ``oras://`` SIF artifacts through :class:`~fuzzball_plugins.images.oras_backend.OrasBackend`;
both speak the OCI Distribution API through
:class:`~fuzzball_plugins.images.registry_client.RegistryClient`.
"""
