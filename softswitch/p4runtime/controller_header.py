"""The @controller_header("packet_in"/"packet_out") headers as byte codecs.

Why here and precomputed: BMv2 prepends the packet_out header to a PacketOut's
payload and splits the packet_in header off frames sent to the CPU port; both are
plain concatenations of big-endian bit fields described by the P4Info's
``controller_packet_metadata``. A `ControllerHeader` is built once per pipeline so
each packet costs one int conversion and a few shifts.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from p4.config.v1 import p4info_pb2 as P4I

from common.p4runtime.p4info import PacketMetadataInfo
from softswitch.p4runtime.errors import DeviceError


@dataclass(slots=True, frozen=True, kw_only=True)
class ControllerHeader:
    """Layout of one controller header: fields in wire order, total size in bytes."""

    name: str
    fields: tuple[PacketMetadataInfo, ...]
    nbytes: int

    @classmethod
    def from_p4info(cls, msg: P4I.ControllerPacketMetadata) -> ControllerHeader:
        fields = tuple(PacketMetadataInfo(id=m.id, name=m.name, bitwidth=m.bitwidth) for m in msg.metadata)
        bits = sum(f.bitwidth for f in fields)
        if bits % 8:
            raise DeviceError(f"controller header {msg.preamble.name!r}: {bits} bits is not a whole "
                              f"number of bytes")
        return cls(name=msg.preamble.name, fields=fields, nbytes=bits // 8)

    def by_id(self, field_id: int) -> PacketMetadataInfo | None:
        for f in self.fields:
            if f.id == field_id:
                return f
        return None

    def encode(self, metadata: Mapping[str, int]) -> bytes:
        """The header bytes for `metadata` (field name -> value); absent fields are 0."""
        unknown = set(metadata) - {f.name for f in self.fields}
        if unknown:
            raise DeviceError(f"controller header {self.name!r}: no field(s) {sorted(unknown)} "
                              f"(have {[f.name for f in self.fields]})")
        acc = 0
        for f in self.fields:
            v = int(metadata.get(f.name, 0))
            if not 0 <= v < 1 << f.bitwidth:
                raise DeviceError(f"controller header {self.name!r}: field {f.name} value {v} does "
                                  f"not fit bit<{f.bitwidth}>")
            acc = (acc << f.bitwidth) | v
        return acc.to_bytes(self.nbytes, "big") if self.nbytes else b""

    def decode(self, frame: bytes) -> tuple[dict[str, int], bytes]:
        """Split `frame` into (metadata by name, payload after the header)."""
        if len(frame) < self.nbytes:
            raise DeviceError(f"controller header {self.name!r}: frame of {len(frame)} bytes is "
                              f"shorter than the {self.nbytes}-byte header")
        acc = int.from_bytes(frame[:self.nbytes], "big")
        out: dict[str, int] = {}
        shift = self.nbytes * 8
        for f in self.fields:
            shift -= f.bitwidth
            out[f.name] = (acc >> shift) & ((1 << f.bitwidth) - 1)
        return out, frame[self.nbytes:]


def controller_headers(p4info: P4I.P4Info) -> dict[str, ControllerHeader]:
    """The controller headers of a P4Info by name ("packet_in", "packet_out")."""
    return {m.preamble.name: ControllerHeader.from_p4info(m) for m in p4info.controller_packet_metadata}
