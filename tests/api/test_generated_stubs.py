"""The committed protobuf stubs are exactly what ``python -m fuzzball_core.api.generate`` writes."""

from __future__ import annotations

from fuzzball_core.api.generate import PROTO_DIR, SOURCE_ROOT, generate, proto_files


def test_committed_stubs_match_a_fresh_generation(tmp_path):
    written = generate(tmp_path)
    assert written, "no proto files found"
    for fresh in written:
        relative = fresh.relative_to(tmp_path)
        committed = SOURCE_ROOT / relative
        assert committed.exists(), (
            f"{relative} is not committed: run python -m fuzzball_core.api.generate"
        )
        assert committed.read_text() == fresh.read_text(), (
            f"{relative} differs from a fresh generation: run python -m fuzzball_core.api.generate"
        )


def test_no_stale_stubs_without_a_proto():
    protos = {p.stem for p in proto_files()}
    for stub in PROTO_DIR.glob("*_pb2*.py*"):
        assert stub.name.split("_pb2")[0] in protos, f"{stub.name} has no .proto any more"
