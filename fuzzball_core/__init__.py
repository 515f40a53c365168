"""fuzzball_core: errors, configuration, hookspecs, plugin manager, workflow spec, services, CLI."""

__version__ = "0.1.0"

#: The Fuzzball release whose API this implementation follows: ``GET /version`` answers it as
#: ``version`` (clients gate features on it; Fuzzball's Nextflow submitter refuses a server
#: below 3.3), with this project's own version beside it as ``serverVersion``.
FUZZBALL_API_RELEASE = "v4.4.0"
