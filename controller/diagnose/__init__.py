"""Fault localisation: joins collective logs with INT paths, loss maps and the topology.

``python -m controller diagnose --out DIR`` reads the ranks' collective logs
(``traffic.collog``), the controller's exported telemetry under ``DIR`` and the
topology, and prints a ranked list of culprits (link direction, switch port, host or
rank; fault kind; onset; confidence; evidence) or "no fault".  See README.md here.
"""
from controller.diagnose.engine import Culprit, Diagnosis, diagnose
from controller.diagnose.evidence import Evidence, Telemetry, load_telemetry

__all__ = ["Culprit", "Diagnosis", "Evidence", "Telemetry", "diagnose",
           "load_telemetry"]
