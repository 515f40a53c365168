"""Workflow texts the engine tests submit (a module of its own: test modules import it by a
name no other folder uses)."""

#: one v1 job that prints ``hi``
HELLO = """
version: v1
jobs:
  hello:
    image: {uri: docker://alpine:latest}
    command: [echo, hi]
"""

#: one v1 job that runs ``true``
ONE_JOB = """
version: v1
jobs:
  only:
    image: {uri: docker://alpine:latest}
    command: ["true"]
"""
