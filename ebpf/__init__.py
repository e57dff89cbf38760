"""Host side of the test bed: eBPF INT sink, loss emulation and the host agent.

Public API:

* ``IntSink`` / ``SinkConfig`` (ebpf.sink): the tc ingress INT sink; ``read`` gives
  ``formats.int_md.HOST_RECORD_DTYPE`` arrays, ``flows`` per-flow PSN state
  (``FLOW_DTYPE``), ``stats`` packet counters by class (``SinkStat``).
* ``LossEmulator`` (ebpf.loss): Bernoulli / Gilbert-Elliott loss at tc, parameters
  changeable at run time, drop and burst counters.
* ``HostAgent`` / ``AgentConfig`` (ebpf.agent): sink + batches to the controller +
  rate/FEC feedback relay to the traffic endpoint; ``python -m ebpf.agent``.
* ``check_setup`` (ebpf.setup_check): one clear message when bcc, kernel headers or
  root are missing.

Submodules import bcc lazily, so ``import ebpf`` works where bcc is absent.
"""

from importlib import import_module
from typing import Any

# Exports resolved on first use (PEP 562): ``python -m ebpf.agent`` then runs the agent
# module once, and importing one part does not load the others.
_EXPORTS = {  # keep in step with __all__
    "AgentConfig": "agent", "AgentStats": "agent", "HostAgent": "agent",
    "AgentError": "errors", "ConfigError": "errors",
    "EbpfError": "errors", "EbpfSetupError": "errors",
    "LossCounters": "loss", "LossEmulator": "loss",
    "FLOW_DTYPE": "records", "FLOW_KEY_DTYPE": "records", "FLOW_STATS_DTYPE": "records",
    "SinkStat": "records", "check_setup": "setup_check",
    "missing_requirements": "setup_check", "IntSink": "sink", "SinkConfig": "sink",
}
__all__ = [
    "FLOW_DTYPE",
    "FLOW_KEY_DTYPE",
    "FLOW_STATS_DTYPE",
    "AgentConfig",
    "AgentError",
    "AgentStats",
    "ConfigError",
    "EbpfError",
    "EbpfSetupError",
    "HostAgent",
    "IntSink",
    "LossCounters",
    "LossEmulator",
    "SinkConfig",
    "SinkStat",
    "check_setup",
    "missing_requirements",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ebpf' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
