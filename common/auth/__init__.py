"""Authentication shared by the host agent (``ebpf``) and the controller.

``keys`` reads the key file (never the command line), ``replay`` keeps the
per-sender sliding window, ``channel`` seals and opens ``formats.auth`` frames and
counts every rejection by reason, ``exposure`` decides whether a process without a
key may listen on an address, ``pki`` makes P4Runtime certificates.  Nothing here
imports ``ebpf`` or ``controller``.
"""
from __future__ import annotations

from .channel import Opened, RejectLog, Signer, Verifier, VerifierStats
from .exposure import ExposureError, check_exposure, is_private_testbed
from .keys import KeyFile, KeyFileError, KeyRing, generate_key_file
from .replay import ReplayWindow

__all__ = ["ExposureError", "KeyFile", "KeyFileError", "KeyRing", "Opened", "RejectLog",
           "ReplayWindow", "Signer", "Verifier", "VerifierStats", "check_exposure",
           "generate_key_file", "is_private_testbed"]
