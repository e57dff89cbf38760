"""The INT hop-record fields, once: every layout of a hop record is derived from ``HOP_FIELDS``.

A hop record (INT-MD v2.1, formats/FORMATS.md "INT over UDP") holds one entry per
instruction bit set, in bit order, standard bits first, then the bits of our domain
(DS ID 0x4850, "HP").  This table says, per bit, what the entry is called, which
parts it packs into its 32-bit words, and how the other layouts name those parts:

* ``formats.int_md``: the struct codecs of ``HopRecord`` and the ``INS_*``/``DS_*`` masks;
* ``controller.int.records``: the collector's ``HOP_DTYPE`` columns and ``FIELD_*`` bits;
* ``controller.int.decode`` / ``controller.int.host``: the word offsets of a record
  for a pair of bitmaps (``word_offsets``) and the column copies of both decoders.

The P4 headers (p4/include/headers.p4: one ``int_<name>_h`` per entry, ``int_hop_t``
in table order) and the C header (ebpf/int_formats.h: ``INS_<NAME>``/``DS_<NAME>`` and
``struct int_hop_rec``) are held to this table by tests/formats/test_int_fields.py.
Adding a field: a row here, its P4 header and C member (the tests name what is missing).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

__all__ = [
    "DS_BIT_WORDS",
    "HOP_FIELDS",
    "STD_BIT_WORDS",
    "HopField",
    "Part",
    "WordOffsets",
    "field_named",
    "word_offsets",
]


@dataclass(frozen=True, slots=True)
class Part:
    """One value packed into a hop-record entry, most significant first."""

    name: str
    """``HopRecord`` attribute, P4 header member and C ``int_hop_rec`` member."""
    bits: int
    column: str = ""
    """The collector's ``HOP_DTYPE`` column (its unit in the name); default ``name``."""

    @property
    def col(self) -> str:
        return self.column or self.name


@dataclass(frozen=True, slots=True)
class HopField:
    """One instruction bit's entry of a hop record."""

    name: str
    """P4 header ``int_<name>_h``, ``int_hop_t`` member, C mask ``INS_``/``DS_<NAME>``."""
    bit: int
    """Spec bit number in its bitmap (0 = most significant)."""
    ds: bool
    """True: a bit of the domain-specific instruction bitmap (our domain only)."""
    flag: int
    """The collector's ``FIELD_*`` presence bit (``HOP_DTYPE['fields']``)."""
    parts: tuple[Part, ...]

    @property
    def mask(self) -> int:
        return 0x8000 >> self.bit

    @property
    def nbits(self) -> int:
        return sum(p.bits for p in self.parts)

    @property
    def words(self) -> int:
        return self.nbits // 32

    def shifts(self) -> tuple[int, ...]:
        """Right shift of every part inside the entry read as one big-endian integer."""
        out, pos = [], self.nbits
        for p in self.parts:
            pos -= p.bits
            out.append(pos)
        return tuple(out)


HOP_FIELDS: tuple[HopField, ...] = (
    HopField("node_id", 0, False, 1 << 0, (Part("node_id", 32),)),
    HopField("ports", 1, False, 1 << 1, (Part("ingress_port", 16), Part("egress_port", 16))),
    HopField("hop_latency", 2, False, 1 << 2, (Part("hop_latency", 32, "hop_latency_us"),)),
    HopField("queue", 3, False, 1 << 3,
             (Part("queue_id", 8), Part("queue_occupancy", 24, "queue_pkts"))),
    HopField("ingress_ts", 4, False, 1 << 4, (Part("ingress_ts", 64, "ingress_ts_us"),)),
    HopField("egress_ts", 5, False, 1 << 5, (Part("egress_ts", 64, "egress_ts_us"),)),
    HopField("tx_util", 7, False, 1 << 9, (Part("tx_util", 32),)),
    HopField("tx_bytes", 0, True, 1 << 6, (Part("tx_bytes", 32),)),
    HopField("queue_bytes", 1, True, 1 << 7, (Part("queue_bytes", 32),)),
    HopField("line_rate", 2, True, 1 << 8, (Part("line_rate", 32, "line_rate_mbps"),)),
)
"""Standard fields in bit order, then the DS fields of our domain in bit order."""

#: Words per standard instruction bit as the spec sizes them, also the bits no row
#: decodes (6: level-2 ports, 8: buffer, 9..14: reserved, 15: checksum complement),
#: so a record asking for them is still skipped correctly.
STD_BIT_WORDS: tuple[int, ...] = tuple(
    next((f.words for f in HOP_FIELDS if not f.ds and f.bit == b), 2 if b == 6 else 1)
    for b in range(16))
#: Words per DS bit of our domain (bits without a row: one word each, as for an
#: unknown domain; the hop ML check still catches inconsistent records).
DS_BIT_WORDS: tuple[int, ...] = tuple(
    next((f.words for f in HOP_FIELDS if f.ds and f.bit == b), 1) for b in range(16))


def field_named(name: str) -> HopField:
    """The row called ``name`` (KeyError naming the known ones otherwise)."""
    for f in HOP_FIELDS:
        if f.name == name:
            return f
    raise KeyError(f"no INT hop field {name!r} (known: {', '.join(f.name for f in HOP_FIELDS)})")


@dataclass(frozen=True, slots=True)
class WordOffsets:
    """Where the rows of a pair of bitmaps sit in one record, and its size in words."""

    words: int
    fields: tuple[tuple[HopField, int], ...]
    """(row, word offset) of every row the bitmaps select, in wire order."""


@functools.lru_cache(maxsize=1024)
def word_offsets(bitmap: int, ds_bitmap: int, *, ds_known: bool = True,
                 report: bool = False) -> WordOffsets:
    """Layout of a hop record, or (``report``) of a Telemetry Report's sink metadata,
    whose RepMdBits bit 0 (node ID) is reserved and carries nothing.

    ``ds_known`` False (another domain): its DS bits count one word each, none decoded.
    """
    pos = 0
    found: list[tuple[HopField, int]] = []
    std = {f.bit: f for f in HOP_FIELDS if not f.ds}
    ds = {f.bit: f for f in HOP_FIELDS if f.ds}
    for b in range(16):
        if not bitmap & (0x8000 >> b) or (report and b == 0):
            continue
        f = std.get(b)
        if f is not None:
            found.append((f, pos))
        pos += STD_BIT_WORDS[b]
    for b in range(16):
        if not ds_bitmap & (0x8000 >> b):
            continue
        f = ds.get(b) if ds_known else None
        if f is not None:
            found.append((f, pos))
        pos += DS_BIT_WORDS[b] if ds_known else 1
    return WordOffsets(words=pos, fields=tuple(found))
