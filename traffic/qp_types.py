"""Shared QP vocabulary: reliability modes, configuration, counters, FEC symbols."""
from __future__ import annotations

import struct
from dataclasses import asdict, dataclass, field
from enum import Enum

from common.loss import LossModel
from formats.roce import RETH_LEN, SYMBOL_HDR_LEN
from traffic import fec
from traffic.cc import registry as cc_registry
from traffic.cc.dcqcn import DcqcnSettings
from traffic.cc.hpcc import HpccSettings
from traffic.errors import ConfigError

__all__ = ["DEFAULT_MTU", "RTO_MIN_S", "QpConfig", "QpCounters", "Reliability", "decode_symbol",
           "encode_symbol"]

_SYM = struct.Struct("!BBH")
RTO_MIN_S = 0.030  # default floor of the retransmission timeout (QpConfig.rto_min_s)
DEFAULT_MTU = 1024  # default payload bytes per packet (QpConfig.mtu)


class Reliability(str, Enum):
    """Loss recovery of one QP."""

    GBN = "gbn"  # go-back-N: NAK sequence error, resend from the lost PSN
    SR = "sr"  # selective repeat (IRN style): SACK bitmap, resend only the lost
    FEC = "fec"  # FEC blocks of k data + m repair, the rest by selective repeat
    AUTO = "auto"  # per message: SR, SR + tail repairs or interleaved FEC (traffic.recovery)

    @property
    def coded(self) -> bool:
        """True when FEC repair packets may arrive (the responder keeps symbols)."""
        return self in (Reliability.FEC, Reliability.AUTO)

    @classmethod
    def parse(cls, text: str) -> Reliability:
        try:
            return cls(text.lower())
        except ValueError:
            raise ConfigError(
                f"reliability mode {text!r} unknown; choose one of gbn, sr, fec, auto"
            ) from None


@dataclass(slots=True, kw_only=True)
class QpConfig:
    """One QP's settings.  Requester and responder of a pair must agree on ``mode``."""

    qpn: int
    peer_qpn: int
    peer_ip: str
    mode: Reliability = Reliability.SR
    mtu: int = DEFAULT_MTU  # payload bytes per packet
    rate_bps: float = 100e6
    window_pkts: int = 512
    fec_k: int = 8
    fec_m: int = 1
    # the timer's floor: above the scheduling delays of a busy host (a peer
    # descheduled for tens of ms has lost nothing; a lower floor resends delivered data)
    rto_min_s: float = RTO_MIN_S
    rto_max_s: float = 2.0
    rto_initial_s: float = 0.05
    dscp: int = 0
    max_msg_bytes: int = 1 << 30  # responder: larger RETH DMA lengths are refused
    cc: str = "none"  # requester: its own rate control, a name of traffic.cc.registry
    dcqcn: DcqcnSettings = field(default_factory=DcqcnSettings)  # with cc=dcqcn
    hpcc: HpccSettings = field(default_factory=HpccSettings)  # with cc=hpcc-sender
    # requester, mode auto: the path's loss model as the controller's loss map last
    # reported it (None: decide from the QP's own counters until feedback arrives)
    path_loss: LossModel | None = None

    def __post_init__(self) -> None:
        for name, v, hi in (("qpn", self.qpn, 0xFFFFFF), ("peer_qpn", self.peer_qpn, 0xFFFFFF)):
            if not 1 <= v <= hi:
                raise ConfigError(f"QP config: {name}={v!r} outside 1..{hi}")
        if not isinstance(self.mode, Reliability):
            self.mode = Reliability.parse(str(self.mode))
        self.cc = cc_registry.parse_sender(str(self.cc))
        if not 64 <= self.mtu <= 9000:
            raise ConfigError(f"QP {self.qpn}: mtu={self.mtu!r} outside 64..9000 bytes")
        if not 1 <= self.window_pkts <= 8000:
            raise ConfigError(f"QP {self.qpn}: window_pkts={self.window_pkts!r} outside 1..8000")
        if not 0 <= self.dscp <= 63:
            raise ConfigError(f"QP {self.qpn}: dscp={self.dscp!r} outside 0..63")
        check_fec(self.fec_k, self.fec_m, where=f"QP {self.qpn}")


def check_fec(k: int, m: int, *, where: str) -> None:
    if not 1 <= k <= fec.MAX_K:
        raise ConfigError(f"{where}: fec_k={k!r} outside 1..{fec.MAX_K}")
    if not 0 <= m <= fec.MAX_M:
        raise ConfigError(f"{where}: fec_m={m!r} outside 0..{fec.MAX_M}")


@dataclass(slots=True, kw_only=True)
class QpCounters:
    """Monotonic per-QP counters (requester and responder fill different ones)."""

    tx_pkts: int = 0
    tx_bytes: int = 0
    tx_data_pkts: int = 0
    retx_pkts: int = 0
    retx_bytes: int = 0
    repair_pkts: int = 0
    timeouts: int = 0
    # timeouts whose packet the receiver had after all (its ACK was late: a busy peer)
    spurious_timeouts: int = 0
    naks_rx: int = 0
    acks_rx: int = 0
    cnps_rx: int = 0
    echo_acks: int = 0  # ACKs that carried INT hop records (formats.int_echo)
    acked_bytes: int = 0
    msgs_done: int = 0
    rx_pkts: int = 0
    rx_data_pkts: int = 0
    delivered_bytes: int = 0
    duplicates: int = 0
    ooo_dropped: int = 0
    ooo_buffered: int = 0
    naks_tx: int = 0
    acks_tx: int = 0
    fec_repaired: int = 0
    fec_blocks_decoded: int = 0
    psn_out_of_window: int = 0
    bad_opcode: int = 0
    bad_length: int = 0
    wrong_peer: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def encode_symbol(opcode: int, reth: bytes | None,
                  payload: bytes | bytearray | memoryview) -> bytes:
    """FEC symbol of one data packet (see formats.roce): opcode, flags, length, RETH, data."""
    return (_SYM.pack(opcode, 1 if reth else 0, len(payload))
            + (reth if reth else bytes(RETH_LEN)) + bytes(payload))


def decode_symbol(sym: bytes) -> tuple[int, bytes | None, bytes]:
    """Inverse of :func:`encode_symbol` (padding dropped)."""
    if len(sym) < SYMBOL_HDR_LEN:
        raise ConfigError(f"FEC symbol of {len(sym)} bytes is shorter than its header")
    op, flags, n = _SYM.unpack_from(sym)
    reth = sym[4:4 + RETH_LEN] if flags & 1 else None
    return op, reth, sym[SYMBOL_HDR_LEN:SYMBOL_HDR_LEN + n]


@dataclass(slots=True, kw_only=True)
class MessageRecord:
    """One message as seen by either side (for FCT and integrity)."""

    msg_id: int
    size: int
    posted_s: float
    done_s: float | None = None
    crc32: int = 0
    tag: str = ""
    retx_pkts: int = 0  # requester: retransmissions of this message's packets
    fec_repaired: int = 0  # responder: packets of this message rebuilt by FEC
    extra: dict = field(default_factory=dict)

    @property
    def fct_s(self) -> float | None:
        return None if self.done_s is None else self.done_s - self.posted_s
