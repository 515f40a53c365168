"""The wire schema: the ``fuzzball.v1`` protos and their generated stubs, the one mapping of
service views to those messages (``proto_messages``), their REST JSON both ways
(``rest_messages``), and the gRPC servicers and ``/v3`` REST gateway over the service contract.
"""
