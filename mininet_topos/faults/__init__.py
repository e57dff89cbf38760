"""Fault injection in the test bed, and the fault-localisation scoring harness.

``spec`` describes a fault (kind, place, onset, duration, strength) and checks it
against the topology; ``inject`` applies and heals it on a running test bed (tc, the
eBPF loss emulator, link state, background traffic, or the ranks' own host-fault
options); ``telemetry`` turns the test bed's counter samples into the diagnosis's
telemetry; ``harness`` runs N trials with one random fault (or none) each and scores
``controller.diagnose`` against the recorded ground truth.
"""
from mininet_topos.faults.spec import FaultSpec, parse_fault

__all__ = ["FaultSpec", "parse_fault"]
