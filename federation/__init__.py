"""fuzzball_federation: the Federate service and its routers."""
