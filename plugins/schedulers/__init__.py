"""Builtin scheduler drivers (entry-point group ``fuzzball.schedulers``).

``default`` (:class:`~fuzzball_plugins.schedulers.default.DefaultScheduler`) is best-fit
placement with FIFO order and EASY backfill over an index of nodes by free capacity.
"""
