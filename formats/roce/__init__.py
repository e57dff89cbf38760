"""RoCEv2 wire format: headers, ICRC, whole packets, numpy dtypes, scapy glue.

Why this package exists: every part of the project that touches RoCEv2 (the traffic
generator, the eBPF host sink tests, the P4 program tests) must agree on the same bytes.
Builders return ``bytes`` and need no socket; the fast path of the traffic generator
uses :class:`PacketTemplate` to rewrite the PSN and the ICRC in place instead of
building a packet per send.

Layout (formats/FORMATS.md "RoCEv2", InfiniBand RoCEv2 annex)::

    Ethernet / IPv4 / UDP dport 4791 / BTH 12 B / [RETH 16 B] / [AETH 4 B] / payload / ICRC 4 B

plus the project's own SACK block and FEC repair packet (formats/FORMATS.md "SACK
block" and "FEC repair packet").  One module per job:

- :mod:`.headers`: constants, opcodes, the fixed headers packed and unpacked, PSN arithmetic
- :mod:`.icrc`: IPv4/UDP headers and the ICRC
- :mod:`.packets`: whole packets built and parsed
- :mod:`.template`: the fast path (in-place PSN and ICRC)
- :mod:`.dtypes`: numpy dtypes for vectorised decoding
- :mod:`.scapy_glue`: scapy dissection for debugging

The package re-exports them all: callers write ``from formats import roce`` and
``roce.build_frame(...)``.
"""
from __future__ import annotations

from formats.roce.dtypes import (
    AETH_DTYPE,
    BTH_DTYPE,
    RETH_DTYPE,
)
from formats.roce.headers import (
    AETH_LEN,
    BTH_LEN,
    CNP_PAD_LEN,
    DATA_OPCODES,
    DEFAULT_PKEY,
    ETH_LEN,
    FEC_HDR_LEN,
    FIRST_OPCODES,
    ICRC_LEN,
    IPV4_LEN,
    LAST_OPCODES,
    PSN_HALF,
    PSN_MASK,
    RETH_LEN,
    RETH_OPCODES,
    ROCEV2_UDP_PORT,
    SACK_HDR_LEN,
    SYMBOL_HDR_LEN,
    UDP_LEN,
    Aeth,
    AethSyndrome,
    Bth,
    FecHeader,
    Opcode,
    Reth,
    RoceFormatError,
    RocePacket,
    SackBlock,
    pack_aeth,
    pack_bth,
    pack_fec_header,
    pack_reth,
    pack_sack,
    psn_add,
    psn_diff,
    psn_lt,
    unpack_aeth,
    unpack_bth,
    unpack_fec_header,
    unpack_reth,
    unpack_sack,
)
from formats.roce.icrc import (
    icrc,
    icrc_continue,
    icrc_for,
    icrc_ok,
    ipv4_checksum,
    ipv4_header,
    masked_crc_prefix,
    udp_header,
    verify_icrc,
)
from formats.roce.packets import (
    build_cnp,
    build_frame,
    build_ipv4_packet,
    build_udp_payload,
    parse_frame,
    parse_udp_payload,
)
from formats.roce.scapy_glue import (
    to_scapy,
)
from formats.roce.template import (
    PacketTemplate,
)

__all__ = [
    "AETH_DTYPE",
    "AETH_LEN",
    "BTH_DTYPE",
    "BTH_LEN",
    "CNP_PAD_LEN",
    "DATA_OPCODES",
    "DEFAULT_PKEY",
    "ETH_LEN",
    "FEC_HDR_LEN",
    "FIRST_OPCODES",
    "ICRC_LEN",
    "IPV4_LEN",
    "LAST_OPCODES",
    "PSN_HALF",
    "PSN_MASK",
    "RETH_DTYPE",
    "RETH_LEN",
    "RETH_OPCODES",
    "ROCEV2_UDP_PORT",
    "SACK_HDR_LEN",
    "SYMBOL_HDR_LEN",
    "UDP_LEN",
    "Aeth",
    "AethSyndrome",
    "Bth",
    "FecHeader",
    "Opcode",
    "PacketTemplate",
    "Reth",
    "RoceFormatError",
    "RocePacket",
    "SackBlock",
    "build_cnp",
    "build_frame",
    "build_ipv4_packet",
    "build_udp_payload",
    "icrc",
    "icrc_continue",
    "icrc_for",
    "icrc_ok",
    "ipv4_checksum",
    "ipv4_header",
    "masked_crc_prefix",
    "pack_aeth",
    "pack_bth",
    "pack_fec_header",
    "pack_reth",
    "pack_sack",
    "parse_frame",
    "parse_udp_payload",
    "psn_add",
    "psn_diff",
    "psn_lt",
    "to_scapy",
    "udp_header",
    "unpack_aeth",
    "unpack_bth",
    "unpack_fec_header",
    "unpack_reth",
    "unpack_sack",
    "verify_icrc",
]
