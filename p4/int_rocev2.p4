/* -*- P4_16 -*- */
/* INT data plane for RoCEv2 on v1model.
 *
 * Every switch runs this program: IPv4 routing with an ARP proxy, INT-MD
 * source (watchlist), transit (hop record push) and sink (strip + Telemetry
 * Report v2.0, or leave INT for the host), link sequence numbers for exact
 * per-link loss counting, per-port and per-watchlist-entry counters, RED-style
 * ECN marking for the DCQCN baseline, and an MTU guard that sends a packet
 * without INT rather than dropping it. Formats: formats/FORMATS.md. Control-plane
 * contract (tables, registers, counters, digest): p4/README.md.
 *
 * Compile-time options (-D): INT_UDP_PORT, ROCEV2_UDP_PORT,
 * REPORT_CLONE_SESSION, REPORT_UDP_SRC_PORT, DEFAULT_PORT_MTU,
 * LINK_SEQ_REORDER_WINDOW, LINK_SEQ_RESYNC_GAP, INT_WATCH_ANY_UDP (let the
 * watchlist see every UDP flow instead of RoCEv2 only).
 */
#include <core.p4>
#include <v1model.p4>

#include "include/defines.p4"
#include "include/headers.p4"
#include "include/metadata.p4"

/* State shared by ingress and egress, hence declared at the top level. */

/* Bytes enqueued minus bytes dequeued, per egress port (HPCC queue bytes;
 * ECN marking input). Ingress adds, egress subtracts and bounds the rest by
 * deq_qdepth * (MTU + QUEUE_FRAME_OVERHEAD): tail drops are not reported. */
register<bit<32>>(PORT_COUNT) queue_bytes;
/* Packets dropped by this program, indexed by DROP_* reason. */
counter(DROP_REASON_COUNT, CounterType.packets) drop_reasons;
/* INT processing events, indexed by EV_* code. */
counter(INT_EVENT_COUNT, CounterType.packets) int_events;

#include "include/int_hop.p4"
#include "include/parser.p4"
#include "include/ingress.p4"
#include "include/egress.p4"

V1Switch(IntParser(), IntVerifyChecksum(), SwitchIngress(), SwitchEgress(),
         IntComputeChecksum(), IntDeparser()) main;
