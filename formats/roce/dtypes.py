"""numpy dtypes of the RoCEv2 headers, for vectorised decoding of captured packets.

Why apart from the byte builders: captures are decoded a batch at a time (numpy views
over many headers), never one packet at a time as the builders work.
"""
from __future__ import annotations

from typing import Final

import numpy as np

BTH_DTYPE: Final = np.dtype(
    [("opcode", "u1"), ("flags", "u1"), ("pkey", ">u2"), ("dqp", ">u4"), ("psn", ">u4")]
)
"""BTH as 12 bytes: ``dqp`` keeps resv8a in its top byte, ``psn`` keeps AckReq|resv7 in
its top byte; mask both with ``PSN_MASK``."""
RETH_DTYPE: Final = np.dtype([("va", ">u8"), ("rkey", ">u4"), ("dma_len", ">u4")])
AETH_DTYPE: Final = np.dtype([("aeth", ">u4")])
"""AETH word: syndrome = ``aeth >> 24``, MSN = ``aeth & PSN_MASK``."""
