"""fuzzball_runtime: the node runtime's Python face over the C core in runtime/csrc."""
