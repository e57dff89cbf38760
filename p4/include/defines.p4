/* Compile-time constants of the RoCEv2 INT data plane.
 *
 * Every value that a deployment may want to change is a #define guarded by
 * #ifndef, so it can be overridden with -D on the compiler command line
 * (for example -DINT_UDP_PORT=5000). Values follow formats/FORMATS.md.
 */
#ifndef INT_ROCEV2_DEFINES_P4_
#define INT_ROCEV2_DEFINES_P4_

/* UDP destination port that announces an INT shim (formats/FORMATS.md default 7777). */
#ifndef INT_UDP_PORT
#define INT_UDP_PORT 7777
#endif

/* RoCEv2 UDP destination port (IANA). */
#ifndef ROCEV2_UDP_PORT
#define ROCEV2_UDP_PORT 4791
#endif

/* Clone session the controller points at the collector's port (P4Runtime
 * CloneSessionEntry session_id). */
#ifndef REPORT_CLONE_SESSION
#define REPORT_CLONE_SESSION 500
#endif

/* Report destinations of one switch: replica instances (egress_rid) of the
 * report clone session; each has its own report sequence (report_seq[rid mod
 * REPORT_DESTINATIONS]), so one collector sees no gaps because another exists. */
#ifndef REPORT_DESTINATIONS
#define REPORT_DESTINATIONS 16
#endif

/* UDP source port of Telemetry Reports. */
#ifndef REPORT_UDP_SRC_PORT
#define REPORT_UDP_SRC_PORT 32766
#endif

/* MTU a port has until the controller sets one (largest IPv4 total length,
 * plus the link sequence header on fabric ports). */
#ifndef DEFAULT_PORT_MTU
#define DEFAULT_PORT_MTU 1500
#endif

/* Most bytes a queued frame is counted with beyond its egress port's MTU:
 * the Ethernet header (14) and a link sequence header it arrived with (6).
 * Egress bounds queue bytes by deq_qdepth * (MTU + this). */
#define QUEUE_FRAME_OVERHEAD 20

/* Link sequence numbers: a backward jump of at most this many packets is
 * reordering; a larger jump in either direction is a resynchronisation
 * (the neighbour restarted), counted apart and never as loss. */
#ifndef LINK_SEQ_REORDER_WINDOW
#define LINK_SEQ_REORDER_WINDOW 1024
#endif
#ifndef LINK_SEQ_RESYNC_GAP
#define LINK_SEQ_RESYNC_GAP 0x100000
#endif

/* Sizes of per-port state: v1model ports are 9 bits wide. */
#define PORT_COUNT 512

/* EtherTypes and IP protocol numbers. */
#define ETHERTYPE_IPV4     0x0800
#define ETHERTYPE_ARP      0x0806
#define ETHERTYPE_LINK_SEQ 0x88B5
#define IP_PROTO_UDP       17

/* INT (spec v2.1, formats/FORMATS.md). */
#define INT_SHIM_TYPE_MD   1
#define INT_SHIM_NPT_UDP   1
#define INT_MD_VERSION     2
#define INT_DS_ID_HPCC     0x4850
#define INT_FIXED_BYTES    16     /* shim 4 + MD header 12 */
#define INT_MD_WORDS       3      /* MD header in 4-byte words */
#define INT_MAX_SHIM_LEN   255    /* shim length field is 8 bits */
/* Instruction bits this program fills: 0-5 and 7 (0 = most significant). */
#define INT_SUPPORTED_INSTRUCTIONS 0xFD00
/* DS bits of the HPCC domain: tx bytes, queue bytes, line rate. */
#define INT_SUPPORTED_DS_INSTRUCTIONS 0xE000
/* Report metadata never repeats the node ID (it is in the group header). */
#define REPORT_MD_INSTRUCTION_MASK 0x7D00

/* Telemetry Report v2.0. */
#define REPORT_VERSION     2
#define REPORT_TYPE_INT    1
#define REPORT_IN_TYPE_IPV4 4
/* Outer Ethernet 14 + IPv4 20 + UDP 8 + group 8 + individual 4 + main 8. */
#define REPORT_FIXED_BYTES 62

/* v1model instance_type values (BMv2 simple_switch). */
#define INSTANCE_TYPE_NORMAL    0
#define INSTANCE_TYPE_I2E_CLONE 1

/* Preserved field list of the report clone (@field_list index). */
#define FL_REPORT 1

/* Sink modes kept in metadata (set by the int_sink table). */
#define SINK_NONE   0
#define SINK_HOST   1
#define SINK_REPORT 2

/* What ingress made of a packet's INT header (local_metadata_t.int_state). */
#define INT_STATE_NONE    0   /* no INT header */
#define INT_STATE_VALID   1   /* understood: transit push, sink strip / report */
#define INT_STATE_NO_PUSH 2   /* MD v2 but hop ML or bitmaps unusable: no push; sink strips */
#define INT_STATE_OPAQUE  3   /* unknown shim type/NPT or MD version: forwarded untouched */

/* Index of the drop_reasons counter (packets dropped, by reason). */
#define DROP_PARSER_ERROR   1   /* truncated Ethernet/IPv4/UDP/ARP */
#define DROP_CHECKSUM       2   /* bad IPv4 header checksum */
#define DROP_TTL            3   /* TTL 0 or 1 */
#define DROP_NO_ROUTE       4   /* ipv4_lpm miss */
#define DROP_ARP            5   /* ARP that is no request for a known address */
#define DROP_NOT_IP         6   /* neither IPv4 nor ARP */
#define DROP_IPV4_MALFORMED 7   /* IPv4 options, version != 4, total length beyond frame */
#define DROP_INT_MALFORMED  8   /* INT shim/MD/stack truncated or lengths inconsistent */
#define DROP_REPORT         9   /* report clone not sent (no collector or too long) */
#define DROP_REASON_COUNT   16

/* Index of the int_events counter (packets, by event). */
#define EV_SOURCE_INSERT      1   /* source inserted shim + MD */
#define EV_TRANSIT_PUSH       2   /* this switch pushed its hop record */
#define EV_HOP_EXHAUSTED      3   /* remaining hop count 0: E bit set */
#define EV_STACK_FULL         4   /* shim length would pass 255 words: E bit set */
#define EV_MTU_SKIP_SOURCE    5   /* source skipped: packet + INT beyond port MTU */
#define EV_MTU_SKIP_TRANSIT   6   /* hop not pushed: beyond port MTU, M bit set */
#define EV_SINK_STRIP         7   /* report-mode sink stripped INT */
#define EV_SINK_HOST          8   /* host-mode sink left INT for the host */
#define EV_REPORT_SENT        9   /* telemetry report built */
#define EV_REPORT_TOO_LONG    10  /* report would exceed 255 words: not sent */
#define EV_REPORT_NO_COLLECTOR 11 /* report_config not set: not sent */
#define EV_BAD_SHIM_TRUNCATED 12  /* INT shim/MD/stack beyond the frame: dropped */
#define EV_BAD_SHIM_LEN       13  /* shim length < 3 or lengths disagree: dropped */
#define EV_UNSUPPORTED_TYPE   14  /* shim type != 1 or NPT != 1: forwarded untouched */
#define EV_BAD_VERSION        15  /* MD version != 2: forwarded untouched */
#define EV_BAD_HOP_ML         16  /* hop ML 0 or != bitmap words: no push */
#define EV_REPORT_SAMPLED_OUT 17  /* report-mode sink: no report for this packet (sampling) */
#define EV_FRAGMENT           18  /* IPv4 fragment: no INT processing */
#define INT_EVENT_COUNT       32

#endif  /* INT_ROCEV2_DEFINES_P4_ */
