"""The running test bed: a Mininet network of P4 switches (or kernel routers) and the
processes on it, and what it measures.

* :mod:`.bed`: :class:`Testbed`, the network with its switches, controller, host agents
  and node processes (start, spawn, stop, clean up);
* :mod:`.sampler`: the counter sampler process (``python -m mininet_topos.testbed.sampler``)
  and :mod:`.telemetry`, reading its samples back as per-link counters;
* :mod:`.auth_keys`: the run's key file and certificates; :mod:`.memory`: process memory.

Experiments (:mod:`mininet_topos.experiment`) and fault trials
(:mod:`mininet_topos.faults`) both run on it; it imports neither.
"""
from .bed import NodeProcess, Testbed
from .errors import ExperimentError, RunError

__all__ = ["ExperimentError", "NodeProcess", "RunError", "Testbed"]
