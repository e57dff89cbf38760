"""Word offsets of INT hop-record fields and report sink metadata, by bitmap.

A hop record (and the sink metadata of a Telemetry Report) holds the fields its
bitmaps select, in bit order, standard fields first, then domain-specific ones.
Everything is a whole number of 4-byte words, so a layout is a mapping from field
name to word offset; the decoder computes one layout per distinct bitmap pair and
then gathers whole columns (no per-record work).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from formats.int_md import INT_DS_ID_HPCC

#: Words per INT-MD instruction bit (bit 0 = MSB): node ID, L1 ports, hop latency,
#: queue ID+occupancy, ingress ts (2), egress ts (2), L2 ports (2), tx utilisation,
#: buffer ID+occupancy, reserved 9..14 (one word each), checksum complement.
INT_BIT_WORDS: tuple[int, ...] = (1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1)
#: Same for RepMdBits of a report: bit 0 (node ID) is reserved there and carries nothing.
REPORT_BIT_WORDS: tuple[int, ...] = (0,) + INT_BIT_WORDS[1:]

#: Fields we decode, by standard instruction bit.
STD_FIELD_BITS: dict[int, str] = {
    0: "node_id",
    1: "ports",
    2: "hop_latency",
    3: "queue",
    4: "ingress_ts",
    5: "egress_ts",
}
#: Domain-specific fields of our domain (DS ID 0x4850, "HP"), by DS instruction bit.
HPCC_DOMAIN_ID = INT_DS_ID_HPCC
DS_FIELD_BITS: dict[int, str] = {0: "tx_bytes", 1: "queue_bytes", 2: "line_rate"}


def _bits(bitmap: int) -> list[int]:
    return [b for b in range(16) if bitmap & (0x8000 >> b)]


@dataclass(slots=True, frozen=True)
class RecordLayout:
    """Word offsets of the decoded fields inside one record, and its size in words."""

    words: int
    offsets: dict[str, int] = field(default_factory=dict)
    #: False when the domain is unknown: DS words are skipped, not decoded.
    ds_known: bool = True


def record_layout(bitmap: int, domain_id: int, ds_bitmap: int, *, report: bool = False) -> RecordLayout:
    """Layout for a hop record (``report=False``) or a report's sink metadata.

    Unknown domains: their DS fields are assumed to be one word per bit (the size
    check against hop ML then still catches inconsistent records).
    """
    sizes = REPORT_BIT_WORDS if report else INT_BIT_WORDS
    offsets: dict[str, int] = {}
    pos = 0
    for bit in _bits(bitmap):
        name = STD_FIELD_BITS.get(bit)
        if name is not None and sizes[bit]:
            offsets[name] = pos
        pos += sizes[bit]
    known = domain_id == HPCC_DOMAIN_ID
    for bit in _bits(ds_bitmap):
        name = DS_FIELD_BITS.get(bit)
        if known and name is not None:
            offsets[name] = pos
        pos += 1
    return RecordLayout(words=pos, offsets=offsets, ds_known=known)
