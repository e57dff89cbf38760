"""The software switch as a process: ports on Linux interfaces, a paced traffic manager,
the P4Runtime server, statistics.

    opts = SwitchOptions(program="p4/examples/ipv4_forward.p4", interfaces={1: "veth1", 2: "veth2"},
                         grpc_server_addr="127.0.0.1:9559", queue_rates_bps={2: 10e6})
    sd = Switchd(opts); sd.start(); ...; sd.close()

Layers: `ports` (AF_PACKET sockets, captures) and `tm` (queues, pacing) know no P4;
`device` joins them to the v1model pipeline and implements the P4Runtime `Device`;
`daemon` owns the lot and the gRPC server; the CLI is `python -m softswitch switch`.
"""
from softswitch.switchd.daemon import Switchd, apply_entries, load_pipeline, start_grpc
from softswitch.switchd.device import DeviceCounters, SwitchDevice
from softswitch.switchd.errors import OptionError, PortError, ProgramError, SwitchdError
from softswitch.switchd.gso import segment_tcp
from softswitch.switchd.options import SwitchOptions
from softswitch.switchd.pcap import PcapWriter, read_pcap
from softswitch.switchd.ports import Port, PortCounters, finish_checksum
from softswitch.switchd.stats import format_stats, read_stats
from softswitch.switchd.tm import DEFAULT_DEPTH_PKTS, EgressQueue, TrafficManager

__all__ = [
    "DEFAULT_DEPTH_PKTS", "DeviceCounters", "EgressQueue", "OptionError", "PcapWriter", "Port",
    "PortCounters", "PortError", "ProgramError", "SwitchDevice", "SwitchOptions", "Switchd",
    "SwitchdError", "TrafficManager", "apply_entries", "finish_checksum", "format_stats",
    "load_pipeline", "read_pcap", "read_stats", "segment_tcp", "start_grpc",
]
