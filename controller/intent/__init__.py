"""Intent: from the topology file to every switch's entries for p4/int_rocev2.p4.

    from controller.intent import compute_intent, IntentOptions, SinkMode, CollectorSpec
    desired = compute_intent(topo, IntentOptions(sink_mode=SinkMode.REPORT,
                                                 collector=CollectorSpec(host="h5")))
    desired["s1"].entries      # TableEntry list (routes, ARP, INT, ports, ECN, report)
"""
from .compute import compute_intent, routing_topology
from .errors import IntentError
from .options import (
    COLLECTOR_UDP_PORT,
    HPCC_DS_INSTRUCTION,
    HPCC_INSTRUCTION_BITMAP,
    REPORT_CLONE_SESSION,
    CollectorSpec,
    EcnProfile,
    IntentOptions,
    SinkMode,
    WatchRule,
)

__all__ = ["COLLECTOR_UDP_PORT", "HPCC_DS_INSTRUCTION", "HPCC_INSTRUCTION_BITMAP", "REPORT_CLONE_SESSION",
           "CollectorSpec", "EcnProfile", "IntentError", "IntentOptions", "SinkMode", "WatchRule",
           "compute_intent", "routing_topology"]
