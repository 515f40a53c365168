"""The service contract shared by Orchestrate and Federate, below the wire schema.

``contract`` is the Protocol the gRPC servicers and the REST gateway call, ``views`` the
immutable values it returns, ``accounts`` the token store both processes authenticate with and
``submission`` how both read a submitted workflow. Nothing here knows about a transport.
"""
