/* INT over UDP (INT-MD mode) and the host record: the C side of formats/FORMATS.md.
 *
 * Shared by the eBPF programs (compiled by bcc) and by plain C test programs
 * (compiled by gcc to compare sizes and offsets with formats/int_md.py).
 * Every wire field is big-endian; the host record is in host byte order and the
 * project only runs on little-endian hosts, so the numpy mirror can be fixed '<'.
 */
#ifndef INT_FORMATS_H
#define INT_FORMATS_H

#include <linux/types.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "host records are defined little-endian; this host is not"
#endif

#ifndef INT_UDP_PORT
#define INT_UDP_PORT 7777
#endif
#define ROCEV2_UDP_PORT 4791
#define INT_SHIM_TYPE_MD 1
#define INT_SHIM_NPT_UDP_PORT 1
#define INT_MD_VERSION 2
#define INT_DS_ID_HPCC 0x4850
#define INT_MAX_HOPS 8
#define INT_SHIM_LEN 4
#define INT_MD_LEN 12
#define INT_FIXED_LEN (INT_SHIM_LEN + INT_MD_LEN)

/* Instruction bits: spec bit n is mask 0x8000 >> n. */
#define INS_NODE_ID 0x8000     /* bit 0: node ID, 4 B */
#define INS_PORTS 0x4000       /* bit 1: ingress port 16, egress port 16 */
#define INS_HOP_LATENCY 0x2000 /* bit 2: hop latency (us), 4 B */
#define INS_QUEUE 0x1000       /* bit 3: queue ID 8, occupancy 24 */
#define INS_INGRESS_TS 0x0800  /* bit 4: ingress timestamp (us), 8 B */
#define INS_EGRESS_TS 0x0400   /* bit 5: egress timestamp (us), 8 B */
#define INS_TX_UTIL 0x0100     /* bit 7: egress port tx utilisation, 4 B */
#define DS_TX_BYTES 0x8000     /* DS bit 0 */
#define DS_QUEUE_BYTES 0x4000  /* DS bit 1 */
#define DS_LINE_RATE 0x2000    /* DS bit 2 */
#define INS_SUPPORTED 0xFD00
#define DS_SUPPORTED 0xE000
/* The profiles the controller asks for (formats/FORMATS.md "INT profiles"). */
#define INT_HPCC_INSTRUCTIONS 0x9400       /* node ID, queue, egress timestamp */
#define INT_HPCC_PORTS_INSTRUCTIONS 0xD400 /* the HPCC profile plus ports */
#define INT_HPCC_DS_INSTRUCTIONS 0xE000    /* tx bytes, queue bytes, line rate */
#define INT_MAX_HOP_BYTES 48   /* every supported field: 36 standard + 12 DS */

struct int_shim {
    __u8 type_npt;     /* type 4, NPT 2, reserved 2 */
    __u8 length;       /* words after the shim */
    __u16 orig_dport;  /* network order */
} __attribute__((packed));

struct int_md_hdr {
    __u32 ver_flags_ml_rhc; /* ver 4, D 1, E 1, M 1, rsvd 12, hop ML 5, RHC 8 */
    __u16 instruction_bitmap;
    __u16 ds_id;
    __u16 ds_instruction;
    __u16 ds_flags;
} __attribute__((packed));

/* One hop inside a host record; absent fields are 0. 56 B. */
struct int_hop_rec {
    __u64 ingress_ts;      /* 0  us */
    __u64 egress_ts;       /* 8  us */
    __u32 node_id;         /* 16 */
    __u32 hop_latency;     /* 20 us */
    __u32 queue_occupancy; /* 24 packets (24 bits) */
    __u32 tx_util;         /* 28 */
    __u32 tx_bytes;        /* 32 mod 2^32 */
    __u32 queue_bytes;     /* 36 */
    __u32 line_rate;       /* 40 Mbit/s */
    __u16 ingress_port;    /* 44 */
    __u16 egress_port;     /* 46 */
    __u8 queue_id;         /* 48 */
    __u8 pad[7];           /* 49 */
};

/* A run of INT packets of one flow seen by a host sink, and one INT sample.
 * 72 + 8 * 56 = 520 B. The run: psn_count packets with the consecutive PSNs psn ..
 * psn + psn_count - 1 (mod 2^24), in that order, between run_first_ns and
 * run_last_ns; every packet the sink strips is in exactly one run. The sample (the
 * hops, capture_ns, sample_psn and the header fields) is the packet that closed the
 * run: its last packet, or the next packet when that one did not continue it; none
 * (hop_count 0) when the agent flushed an idle run. Packets without a BTH make runs
 * of one. */
struct int_host_record {
    __u64 capture_ns;          /* 0  of the sample, bpf_ktime_get_ns (CLOCK_MONOTONIC) */
    __u32 src_ip;              /* 8  host order */
    __u32 dst_ip;              /* 12 */
    __u16 src_port;            /* 16 */
    __u16 orig_dport;          /* 18 */
    __u32 dest_qp;             /* 20 (0 unless the inner packet is RoCEv2) */
    __u32 psn;                 /* 24 first PSN of the run */
    __u16 ip_total_len;        /* 28 restored IPv4 total length */
    __u8 opcode;               /* 30 */
    __u8 hop_count;            /* 31 */
    __u16 instruction_bitmap;  /* 32 */
    __u16 ds_id;               /* 34 */
    __u16 ds_instruction;      /* 36 */
    __u16 ds_flags;            /* 38 */
    __u8 hop_ml;               /* 40 */
    __u8 remaining_hop_count;  /* 41 */
    __u8 md_flags;             /* 42 D<<2 | E<<1 | M */
    __u8 ip_tos;               /* 43 */
    __u32 ifindex;             /* 44 */
    __u32 psn_count;           /* 48 packets in the run (>= 1) */
    __u32 sample_psn;          /* 52 PSN of the sample packet */
    __u64 run_first_ns;        /* 56 coarse CLOCK_MONOTONIC (bpf_ktime_get_coarse_ns) */
    __u64 run_last_ns;         /* 64 */
    struct int_hop_rec hops[INT_MAX_HOPS]; /* 72, newest hop first */
};

/* A flow's open run in one word, swapped atomically (so a packet and the flush
 * never both emit it): first PSN in bits 0-23, packets in bits 24-47; 0 = none. */
#define RUN_PSN_MASK 0xFFFFFFull
#define RUN_ONE (1ull << 24)
#define RUN_MAX_PACKETS 65535

/* Per-flow state kept by the sink (key: IPv4 pair, UDP source port, dest QP). */
struct int_flow_key {
    __u32 src_ip;   /* host order */
    __u32 dst_ip;
    __u32 dest_qp;
    __u16 src_port;
    __u16 pad;
};

struct int_flow_stats {
    __u64 packets;
    __u64 bytes;          /* restored IPv4 total length summed */
    __u64 int_packets;    /* of which carried INT */
    __u64 lost_packets;   /* PSNs skipped over when a later PSN arrived */
    __u64 loss_events;    /* number of forward jumps */
    __u64 out_of_order;   /* PSN at or behind the highest seen (late or repeated) */
    __u64 first_ns;
    __u64 last_ns;
    __u32 highest_psn;
    __u32 last_gap;       /* length of the latest forward jump */
    __u32 path_signature; /* FNV-1a of node IDs, wire order (0: no node IDs), as of
                           * the last host record */
    __u8 last_hop_count;
    __u8 opcode;
    __u16 pad;
    __u64 run;            /* the open run (RUN_* above), INT packets with a BTH */
    __u64 run_first_ns;
    __u64 run_last_ns;
};

/* The flush program's input (BPF_PROG_TEST_RUN data): a header, then count keys. */
#define FLUSH_MAX_KEYS 64
struct int_flush_hdr {
    __u32 magic;          /* FLUSH_MAGIC */
    __u32 count;          /* keys that follow, at most FLUSH_MAX_KEYS */
    __u64 pad;            /* the data must hold an Ethernet header's 14 bytes */
};
#define FLUSH_MAGIC 0x464C5553u
#define FLUSH_RING_FULL 0x10000

/* Counters in the "stats" array, one slot each. */
enum int_stat {
    STAT_INT_STRIPPED = 0,   /* INT read, recorded and removed */
    STAT_ROCE_PLAIN = 1,     /* RoCEv2 without INT, counted per flow */
    STAT_OTHER = 2,          /* anything else, passed untouched */
    STAT_BAD_SHORT = 3,      /* too short for shim + MD header (or BTH) */
    STAT_BAD_SHIM = 4,       /* shim type != INT-MD or NPT != 1 */
    STAT_BAD_VERSION = 5,    /* MD version != 2 */
    STAT_BAD_LENGTH = 6,     /* shim length < 3 words or beyond the packet */
    STAT_BAD_HOP_ML = 7,     /* hop ML != bitmaps, or stack not a multiple of it */
    STAT_BAD_TOO_MANY = 8,   /* more than 8 hops */
    STAT_BAD_BITMAP = 9,     /* bits the sink does not know */
    STAT_BAD_IP = 10,        /* IPv4 options or fragment: INT not touched */
    STAT_RINGBUF_FULL = 11,  /* record lost, packet still stripped */
    STAT_STRIP_FAILED = 12,  /* adjust_room refused, or a GSO aggregate: passed unmodified */
    STAT_MALFORMED_DROPPED = 13, /* malformed and MALFORMED_DROP=1 */
    STAT_ECHO_APPENDED = 14, /* egress: INT echo added to an ACK (INT_ECHO=1) */
    STAT_ECHO_NO_HOPS = 15,  /* egress: ACK of a QP whose data brought no INT yet */
    STAT_ECHO_FAILED = 16,   /* egress: the ACK could not grow: sent without echo */
    STAT_RUN_CONTENDED = 17, /* a run changed under us three times: packet sent alone */
    STAT_RUNS_FLUSHED = 18,  /* idle runs the agent flushed (int_sink_flush) */
    STAT_MAX = 19,
};

/* INT echoed in ACKs (formats/int_echo.py has the bit layout): hop records and a
 * trailer appended after the ICRC of an ACKNOWLEDGE, flagged in BTH resv8a. */
#define ECHO_BTH_FLAG 0x20
#define ECHO_MAGIC 0xE1
#define ECHO_VERSION 1
#define ECHO_HOP_WORDS 5
#define ECHO_HOP_LEN 20
#define ECHO_TRAILER_LEN 4
#define ECHO_MAX_LEN (ECHO_TRAILER_LEN + INT_MAX_HOPS * ECHO_HOP_LEN) /* 164 */

/* One echoed hop, wire format (every field big-endian). */
struct int_echo_hop {
    __u32 node_id;
    __u32 egress_ts;   /* us, low 32 bits */
    __u32 tx_bytes;    /* mod 2^32 */
    __u32 queue_bytes;
    __u32 line_rate;   /* Mbit/s */
} __attribute__((packed));

/* The last 4 bytes of an ACK that carries an echo. */
struct int_echo_trailer {
    __u8 magic;        /* ECHO_MAGIC */
    __u8 ver_flags;    /* version 4 (ECHO_VERSION), flags 4 (0) */
    __u8 hop_count;    /* 0..INT_MAX_HOPS */
    __u8 hop_words;    /* ECHO_HOP_WORDS */
} __attribute__((packed));

/* The receiver's latest hops per QP: written by the ingress sink from each data
 * packet into the data flow's entry (behind struct int_flow_stats), appended by the
 * egress program to the next ACK of the same QP, which finds the flow's key in the
 * "echo" map under this key (the project numbers a QP the same at both ends, so the
 * data's destination QP is the ACK's destination QP). Host order. */
struct int_echo_key {
    __u32 peer_ip;     /* the data's source, the ACK's destination */
    __u32 local_ip;
    __u32 qp;
};

struct int_echo_entry {
    __u64 updated_ns;              /* capture time of the data packet */
    __u32 len;                     /* bytes to append: ECHO_TRAILER_LEN + n * ECHO_HOP_LEN */
    __u32 psn;                     /* of the data packet the hops came from */
    __u8 bytes[256];               /* the echo as sent: hops, then the trailer (164 B at
                                    * most; 256 lets the egress program mask its length) */
};

#endif /* INT_FORMATS_H */
