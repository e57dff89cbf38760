"""Packet and record formats every part of the project agrees on, defined once in Python.

The P4 side of the same formats is in ``p4/include/``, the C side in
``ebpf/int_formats.h``; tests check all three against the same byte strings.

* :mod:`formats.roce`: RoCEv2 (BTH, RETH, AETH, CNP, ICRC) and the project's SACK and
  FEC-repair extensions;
* :mod:`formats.int_md`: INT-MD over UDP (shim, MD header, hop records) and host records;
* :mod:`formats.telemetry_report`: Telemetry Report v2.0 (sink switch -> collector);
* :mod:`formats.agent_batch`: host-record batches (host agent -> collector);
* :mod:`formats.feedback`: rate and FEC feedback records (controller -> host agent) and
  their confirmations (host agent -> controller: applied at which PSN, or why not);
* :mod:`formats.auth`: the authenticated frame around those three (HMAC tag, key id,
  sender, epoch + counter against replays; user space only, no P4 or C side);

The bit layouts, the protocol constants and the project's extensions are written down
in ``formats/FORMATS.md``; ``tests/formats`` checks that the constants of the P4 defines,
the C header and these modules agree.  Modules import nothing from the rest of the
project, so any part may use them.
"""
