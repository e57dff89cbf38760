"""RoCEv2 headers (BTH, RETH, AETH) and the project's SACK and FEC headers as bytes.

Why a module of its own: these are the fixed-size pieces every RoCEv2 packet is made
of; the packet builders, the parsers and the fast-path template all pack and unpack
them the same way. Field layouts: formats/FORMATS.md
"RoCEv2", "SACK block" and "FEC repair packet".
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

import numpy as np

ROCEV2_UDP_PORT: Final = 4791
"""RoCEv2 UDP destination port (IANA)."""
PSN_MASK: Final = 0xFFFFFF
PSN_HALF: Final = 0x800000
BTH_LEN: Final = 12
RETH_LEN: Final = 16
AETH_LEN: Final = 4
ICRC_LEN: Final = 4
CNP_PAD_LEN: Final = 16
FEC_HDR_LEN: Final = 8
SYMBOL_HDR_LEN: Final = 20
SACK_HDR_LEN: Final = 4
IPV4_LEN: Final = 20
UDP_LEN: Final = 8
ETH_LEN: Final = 14
DEFAULT_PKEY: Final = 0xFFFF

_BTH = struct.Struct("!BBHI I")  # opcode, se|m|pad|tver, pkey, resv8a|dqp, ackreq|psn
_RETH = struct.Struct("!QII")
_AETH = struct.Struct("!I")
_FEC = struct.Struct("!BBBBHH")
PSN_FIELD = struct.Struct("!I")  # the BTH word holding AckReq and the PSN (offset 8)


class Opcode(IntEnum):
    """BTH opcodes used by the project (RC transport, CNP, project FEC repair)."""

    SEND_ONLY = 0x04
    WRITE_FIRST = 0x06
    WRITE_MIDDLE = 0x07
    WRITE_LAST = 0x08
    WRITE_ONLY = 0x0A
    ACKNOWLEDGE = 0x11
    CNP = 0x81
    FEC_REPAIR = 0xC0


#: opcodes that carry a RETH after the BTH
RETH_OPCODES: Final = frozenset({Opcode.WRITE_FIRST, Opcode.WRITE_ONLY})
#: opcodes that end a message
LAST_OPCODES: Final = frozenset({Opcode.WRITE_LAST, Opcode.WRITE_ONLY, Opcode.SEND_ONLY})
#: opcodes that start a message
FIRST_OPCODES: Final = frozenset({Opcode.WRITE_FIRST, Opcode.WRITE_ONLY, Opcode.SEND_ONLY})
DATA_OPCODES: Final = frozenset(
    {Opcode.SEND_ONLY, Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST,
     Opcode.WRITE_ONLY}
)


class AethSyndrome(IntEnum):
    """AETH syndromes: ACK with unlimited credit, NAK PSN sequence error, RNR NAK."""

    ACK = 0x1F  # 0b000 + credit count 11111 (invalid/unlimited credit)
    NAK_PSN_SEQ_ERROR = 0x60
    NAK_INVALID_REQUEST = 0x61
    RNR_NAK = 0x20

    @staticmethod
    def is_nak(syndrome: int) -> bool:
        return (syndrome & 0x60) == 0x60


class RoceFormatError(ValueError):
    """A RoCEv2 packet could not be built or parsed; the message says what and where."""


# -- 24-bit PSN arithmetic ---------------------------------------------------------
def psn_add(psn: int, n: int) -> int:
    """``psn + n`` modulo 2**24."""
    return (psn + n) & PSN_MASK


def psn_diff(a: int, b: int) -> int:
    """Signed distance ``a - b`` in the 24-bit PSN space, in [-2**23, 2**23)."""
    d = (a - b) & PSN_MASK
    return d - 0x1000000 if d >= PSN_HALF else d


def psn_lt(a: int, b: int) -> bool:
    """True when PSN ``a`` comes before ``b`` (half-space comparison)."""
    return psn_diff(a, b) < 0


# -- header dataclasses ----------------------------------------------------------------
@dataclass(slots=True, kw_only=True, frozen=True)
class Bth:
    opcode: int
    dest_qp: int
    psn: int
    solicited: bool = False
    mig_req: bool = False
    pad_count: int = 0
    tver: int = 0
    p_key: int = DEFAULT_PKEY
    fecn: bool = False
    becn: bool = False
    ack_req: bool = False


@dataclass(slots=True, kw_only=True, frozen=True)
class Reth:
    va: int
    r_key: int
    dma_length: int


@dataclass(slots=True, kw_only=True, frozen=True)
class Aeth:
    syndrome: int
    msn: int

    @property
    def is_nak(self) -> bool:
        return AethSyndrome.is_nak(self.syndrome)


@dataclass(slots=True, kw_only=True, frozen=True)
class FecHeader:
    k: int
    m: int
    index: int
    symbol_len: int
    data_count: int
    stride: int = 0  # 0/1: the block's data are consecutive PSNs; else PSN + i x stride


@dataclass(slots=True, kw_only=True, frozen=True)
class SackBlock:
    base_psn: int
    bitmap: bytes

    def received_psns(self) -> list[int]:
        """PSNs whose bit is set, in order."""
        bits = np.unpackbits(np.frombuffer(self.bitmap, dtype=np.uint8))
        return [psn_add(self.base_psn, int(i)) for i in np.flatnonzero(bits)]


@dataclass(slots=True, kw_only=True, frozen=True)
class RocePacket:
    """A parsed RoCEv2 UDP payload (BTH up to and including the ICRC)."""

    bth: Bth
    reth: Reth | None
    aeth: Aeth | None
    sack: SackBlock | None
    fec: FecHeader | None
    payload: bytes
    icrc: int


# -- builders --------------------------------------------------------------------------
def check_range(name: str, value: int, bits: int, where: str) -> None:
    if not 0 <= value < (1 << bits):
        raise RoceFormatError(f"{where}: {name}={value!r} does not fit in {bits} bits")


def pack_bth(
    opcode: int,
    dest_qp: int,
    psn: int,
    *,
    solicited: bool = False,
    mig_req: bool = False,
    pad_count: int = 0,
    tver: int = 0,
    p_key: int = DEFAULT_PKEY,
    fecn: bool = False,
    becn: bool = False,
    ack_req: bool = False,
) -> bytes:
    """Return the 12-byte BTH."""
    check_range("opcode", opcode, 8, "BTH")
    check_range("dest_qp", dest_qp, 24, "BTH")
    check_range("psn", psn, 24, "BTH")
    check_range("pad_count", pad_count, 2, "BTH")
    check_range("tver", tver, 4, "BTH")
    check_range("p_key", p_key, 16, "BTH")
    b1 = (solicited << 7) | (mig_req << 6) | (pad_count << 4) | tver
    w2 = (fecn << 31) | (becn << 30) | dest_qp
    w3 = (ack_req << 31) | psn
    return _BTH.pack(opcode, b1, p_key, w2, w3)


def pack_reth(va: int, r_key: int, dma_length: int) -> bytes:
    """Return the 16-byte RETH (virtual address, R_Key, DMA length)."""
    check_range("va", va, 64, "RETH")
    check_range("r_key", r_key, 32, "RETH")
    check_range("dma_length", dma_length, 32, "RETH")
    return _RETH.pack(va, r_key, dma_length)


def pack_aeth(syndrome: int, msn: int) -> bytes:
    """Return the 4-byte AETH."""
    check_range("syndrome", syndrome, 8, "AETH")
    check_range("msn", msn & PSN_MASK, 24, "AETH")
    return _AETH.pack((syndrome << 24) | (msn & PSN_MASK))


def pack_fec_header(*, k: int, m: int, index: int, symbol_len: int, data_count: int,
                    stride: int = 0) -> bytes:
    """Return the 8-byte project FEC repair header (see the module docstring);
    ``stride`` > 1 says the block's data packets are interleaved that far apart."""
    for name, v, bits in (("k", k, 8), ("m", m, 8), ("index", index, 8), ("stride", stride, 8),
                          ("symbol_len", symbol_len, 16), ("data_count", data_count, 16)):
        check_range(name, v, bits, "FEC header")
    return _FEC.pack(k, m, index, stride, symbol_len, data_count)


def pack_sack(base_psn: int, bitmap: bytes) -> bytes:
    """Return a SACK block: header (words, base PSN) then the bitmap (multiple of 4 B)."""
    if len(bitmap) % 4 or len(bitmap) // 4 > 255:
        raise RoceFormatError(
            f"SACK: bitmap of {len(bitmap)} bytes must be a multiple of 4 and at most 1020"
        )
    check_range("base_psn", base_psn, 24, "SACK")
    return _AETH.pack(((len(bitmap) // 4) << 24) | base_psn) + bytes(bitmap)


def unpack_bth(buf: bytes | bytearray | memoryview, offset: int = 0) -> Bth:
    if len(buf) - offset < BTH_LEN:
        raise RoceFormatError(
            f"BTH: truncated at offset {offset}: {len(buf) - offset} bytes, need {BTH_LEN}"
        )
    op, b1, pkey, w2, w3 = _BTH.unpack_from(buf, offset)
    return Bth(
        opcode=op, solicited=bool(b1 >> 7), mig_req=bool((b1 >> 6) & 1),
        pad_count=(b1 >> 4) & 3, tver=b1 & 15, p_key=pkey, fecn=bool(w2 >> 31),
        becn=bool((w2 >> 30) & 1), dest_qp=w2 & PSN_MASK, ack_req=bool(w3 >> 31),
        psn=w3 & PSN_MASK,
    )


def unpack_reth(buf: bytes | bytearray | memoryview, offset: int = 0) -> Reth:
    if len(buf) - offset < RETH_LEN:
        raise RoceFormatError(f"RETH: truncated at offset {offset}")
    va, rkey, dlen = _RETH.unpack_from(buf, offset)
    return Reth(va=va, r_key=rkey, dma_length=dlen)


def unpack_aeth(buf: bytes | bytearray | memoryview, offset: int = 0) -> Aeth:
    if len(buf) - offset < AETH_LEN:
        raise RoceFormatError(f"AETH: truncated at offset {offset}")
    (w,) = _AETH.unpack_from(buf, offset)
    return Aeth(syndrome=w >> 24, msn=w & PSN_MASK)


def unpack_fec_header(buf: bytes | bytearray | memoryview, offset: int = 0) -> FecHeader:
    if len(buf) - offset < FEC_HDR_LEN:
        raise RoceFormatError(f"FEC header: truncated at offset {offset}")
    k, m, index, stride, slen, dcount = _FEC.unpack_from(buf, offset)
    return FecHeader(k=k, m=m, index=index, symbol_len=slen, data_count=dcount, stride=stride)


def unpack_sack(buf: bytes | bytearray | memoryview, offset: int = 0) -> SackBlock:
    if len(buf) - offset < SACK_HDR_LEN:
        raise RoceFormatError(f"SACK: truncated header at offset {offset}")
    (w,) = _AETH.unpack_from(buf, offset)
    n = (w >> 24) * 4
    start = offset + SACK_HDR_LEN
    if len(buf) - start < n:
        raise RoceFormatError(f"SACK: bitmap of {n} bytes truncated at offset {start}")
    return SackBlock(base_psn=w & PSN_MASK, bitmap=bytes(buf[start:start + n]))

