"""Packet-in / packet-out metadata by name (the program's @controller_header fields).

Why separate from the client: the client moves PacketIn/PacketOut protobufs; naming
their metadata needs the schema, and stays a pure function testable without a stream.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2 as P

from .codec import decode_bits, encode_bits
from .errors import CodecError, SchemaError, did_you_mean
from .schema import Schema


@dataclass(slots=True, frozen=True, kw_only=True)
class PacketIn:
    """A packet the switch sent to the controller, with its metadata by name."""

    payload: bytes
    metadata: dict[str, int]


def encode_packet_out(schema: Schema, values: Mapping[str, int]) -> list[tuple[int, bytes]]:
    """(metadata id, canonical bytes) for every packet_out field; fields not given are 0."""
    if not schema.packet_out:
        raise SchemaError("the P4 program has no @controller_header(\"packet_out\") header")
    names = [m.name for m in schema.packet_out]
    for name in values:
        if name not in names:
            raise SchemaError(f"packet_out has no metadata {name!r}{did_you_mean(name, names)}; "
                              f"fields: {names}")
    return [(m.id, encode_bits(int(values.get(m.name, 0)), m.bitwidth, f"packet_out {m.name}"))
            for m in schema.packet_out]


def decode_packet_in(schema: Schema, pkt: P.PacketIn) -> PacketIn:
    """PacketIn protobuf -> payload and metadata by name (unknown ids are an error)."""
    by_id = {m.id: m for m in schema.packet_in}
    meta: dict[str, int] = {}
    for md in pkt.metadata:
        m = by_id.get(md.metadata_id)
        if m is None:
            raise CodecError(f"packet_in metadata id {md.metadata_id} is not in the P4Info "
                             f"(known: {sorted(by_id)})")
        meta[m.name] = decode_bits(md.value, m.bitwidth, f"packet_in {m.name}")
    return PacketIn(payload=bytes(pkt.payload), metadata=meta)
