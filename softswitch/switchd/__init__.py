"""What a switch process is made of, whatever the target: ports on Linux interfaces,
a paced traffic manager, the command-line options, statistics, the entries file and
the P4Runtime server's start.

    opts = SwitchOptions(program="p4/examples/ipv4_forward.p4", interfaces={1: "veth1", 2: "veth2"},
                         grpc_server_addr="127.0.0.1:9559", queue_rates_bps={2: 10e6})
    sd = target_named("python").daemon(opts); sd.start(); ...; sd.close()

Layers: `ports` (AF_PACKET sockets, captures) and `tm` (queues, pacing) know no P4;
`serve` applies entries and starts the gRPC server; each target's daemon joins them to
its pipeline (``softswitch.targets.python.daemon.Switchd``,
``softswitch.targets.ebpf.daemon.EbpfSwitchd``), as behavioral-model's bm_sim serves
simple_switch; the CLI is `python -m softswitch switch --target NAME`.
"""
from softswitch.switchd.errors import OptionError, PortError, ProgramError, SwitchdError
from softswitch.switchd.gso import segment_tcp
from softswitch.switchd.options import SwitchOptions
from softswitch.switchd.pcap import PcapWriter, read_pcap
from softswitch.switchd.ports import Port, PortCounters, finish_checksum
from softswitch.switchd.serve import apply_entries, start_grpc
from softswitch.switchd.stats import format_stats, read_stats
from softswitch.switchd.tm import DEFAULT_DEPTH_PKTS, EgressQueue, TrafficManager

__all__ = [
    "DEFAULT_DEPTH_PKTS", "EgressQueue", "OptionError", "PcapWriter", "Port",
    "PortCounters", "PortError", "ProgramError", "SwitchOptions",
    "SwitchdError", "TrafficManager", "apply_entries", "finish_checksum", "format_stats",
    "read_pcap", "read_stats", "segment_tcp", "start_grpc",
]
