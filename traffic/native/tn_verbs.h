/* tn_verbs.h - the native RoCEv2 transport engine's public API (verbs-like).
 *
 * Why: the Python endpoint (traffic/endpoint.py) spends ~36 us of CPU per data packet
 * and paces at millisecond granularity; this engine runs the same data path in C on
 * one thread per engine with batched syscalls and microsecond pacing.  Python drives
 * it through ctypes (traffic/native_endpoint.py); C programs include this header
 * (traffic/native/progs/tn_write_bw.c is an example).
 *
 * Wire format: exactly that of traffic/ (formats/FORMATS.md): RoCEv2 RC WRITE/SEND
 * with BTH/RETH/AETH and a valid ICRC, ACK/NAK, the project's SACK block and FEC
 * repair packet, CNP on CE, INT echoed in ACKs.  A native requester and a Python
 * responder interoperate, and the reverse.
 *
 * Model: an engine owns one IPv4 address (it binds ip:4791 for what it receives) and
 * many QPs, each a requester (sends WRITE/SEND) or a responder (receives them), each
 * with its own UDP send socket whose source port is the QP's UDP entropy.  QP numbers
 * need no handshake (traffic/README.md).  Posted buffers are not copied: they must stay
 * valid until their completion is polled.  Every call is thread safe.
 *
 * Time: seconds since the engine was created (CLOCK_MONOTONIC), as doubles, the time
 * base of the Python endpoint.  In step mode (TN_ENGINE_STEP) no thread or socket is
 * used: the caller injects received packets and the time, and captures what would
 * have been sent (deterministic differential tests against the Python state machines).
 */
#ifndef TN_VERBS_H
#define TN_VERBS_H

#include <stddef.h>
#include <stdint.h>
#include "cc_dcqcn.h"
#include "cc_hpcc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a struct or call below changes: the binding refuses another version
 * (traffic/native_endpoint.py API_VERSION).  2: tn_qp_state's est_sent, est_lost,
 * est_pairs (mode auto's own-loss counts), tn_engine_counters' spin_s .. budget_out_s;
 * tn_api_version.  3: tn_path_changed.  4: tn_engine_counters' rx_poll_s,
 * tx_timestamps, wire_delay_s.  5: TN_ENGINE_GSO; tn_engine_counters' gso_sends,
 * gso_pkts, gro_reads, gro_pkts */
#define TN_API_VERSION 5

/* TN_MODE_AUTO: per-message recovery (traffic.recovery decides above the engine): a
 * requester sends each message as its plan says (tn_post_write_plan; plain selective
 * repeat without one), a responder is the FEC responder (it decodes any block,
 * interleaved ones too) */
enum tn_mode { TN_MODE_GBN = 0, TN_MODE_SR = 1, TN_MODE_FEC = 2, TN_MODE_AUTO = 3 };
enum tn_role { TN_REQUESTER = 0, TN_RESPONDER = 1 };
enum tn_cc { TN_CC_NONE = 0, TN_CC_DCQCN = 1, TN_CC_HPCC = 2 };
enum tn_engine_flags {
    TN_ENGINE_THREAD = 1,   /* run the I/O loop on an engine thread (tn_engine_start) */
    TN_ENGINE_STEP = 2,     /* no sockets: tn_inject / tn_step / tn_take_output */
    TN_ENGINE_RT = 4,       /* engine thread at SCHED_FIFO priority 1, the default unless
                             * env TN_ENGINE_RT=0 (the flag overrides that): ACKs and
                             * departures on time on a loaded host; needs CAP_SYS_NICE */
    TN_ENGINE_GSO = 8,      /* UDP segmentation offload: a QP's same-size frames leave in
                             * one send (UDP_SEGMENT) and the receive socket takes them
                             * back coalesced (UDP_GRO), one trip through the kernel per
                             * run of up to 64 frames instead of per frame, as QUIC stacks
                             * do; the frames carry a UDP checksum (the kernel's GSO needs
                             * it).  Off by default (env TN_ENGINE_GSO=1 turns it on): a tc
                             * program on a host interface (the test bed's eBPF switches,
                             * INT sink, loss emulator) would see one large packet. */
};
enum tn_wc_kind { TN_WC_SEND_DONE = 1, TN_WC_RECV_DONE = 2 };

struct tn_engine;

/* One group of a message's plan (traffic.recovery.Group): packets first .. first+count-1
 * of the message coded as `blocks` interleaved blocks (block j: the packets at
 * first + j, first + j + blocks, ...), each with m repair packets sent right behind
 * the group's last packet in the interleaver's round robin.  A tail is one group over
 * the last T packets; packets outside every group are plain selective repeat.
 * Groups ascend and do not overlap; count 1..512, blocks 1..16 (at most 128 packets a
 * block), m 0..16. */
struct tn_group {
    uint32_t first, count, blocks, m;
};

struct tn_engine_attr {
    uint32_t ip;            /* IPv4 address, network byte order */
    uint16_t port;          /* UDP port bound for receiving (4791) */
    uint16_t _pad;
    uint32_t flags;         /* tn_engine_flags */
    uint32_t rcvbuf_bytes;  /* receive socket buffer (8 MiB when 0) */
    uint32_t batch;         /* packets per recvmmsg/sendmmsg (64 when 0) */
    uint32_t cq_depth;      /* completion queue entries (65536 when 0) */
    /* receive-side loss emulation (common/loss.py's models, an engine-own seeded RNG):
     * 0 none, 1 Bernoulli(p), 2 Gilbert-Elliott(p, r, h, k); data and FEC repair
     * packets only unless loss_scope_all */
    uint32_t loss_kind;
    uint32_t loss_scope_all;
    double loss_p, loss_r, loss_h, loss_k;
    uint64_t loss_seed;
    double rx_delay_s;      /* hold every received packet this long (0..10 s), FIFO */
};

struct tn_qp_attr {
    uint32_t qpn;           /* 1..2^24-1 */
    uint32_t peer_qpn;
    uint32_t peer_ip;       /* network byte order */
    uint32_t role;          /* tn_role */
    uint32_t mode;          /* tn_mode */
    uint32_t mtu;           /* payload bytes per packet, 64..9000 */
    double rate_bps;        /* pacing rate (the line rate with CC) */
    uint32_t window_pkts;   /* 1..8000 */
    uint32_t fec_k, fec_m;  /* 1..128, 0..16 */
    uint32_t dscp;          /* 0..63; data is sent ECT(0) */
    double rto_min_s, rto_max_s, rto_initial_s;
    uint64_t max_msg_bytes; /* responder: larger RETH DMA lengths are refused */
    uint32_t start_psn;
    uint32_t keep_data;     /* responder: completions carry the message bytes */
    double burst_s;         /* pacer depth in seconds of rate ... */
    uint32_t min_burst_bytes; /* ... and at least this many bytes */
    uint32_t sport;         /* step mode: the UDP source port to assume (else bound) */
    uint32_t cc;            /* tn_cc (requester) */
    uint32_t hpcc_window;   /* HPCC bounds packets in flight by W R / R_max */
    double hpcc_pacing_burst_pkts; /* HPCC pacer depth in full packets (1: ns-3) */
    struct tn_hpcc_params hpcc;    /* with TN_CC_HPCC */
    struct tn_dcqcn_params dcqcn;  /* with TN_CC_DCQCN */
    /* pacing smoothness: a paced packet (its time at the rate >= TN_SMOOTH_MIN_GAP_S)
     * never leaves sooner than that time less catchup_s after the one before, so the
     * pacer catches up a late wake-up over several gaps instead of in a burst (a gap
     * under catchup_s may shrink to nothing: its error is at most the gap); 0: the token
     * bucket alone (traffic/pacing.py's, the step-mode reference) */
    double catchup_s;
};
#define TN_SMOOTH_MIN_GAP_S 4e-6

/* A requester's congestion control, for snapshots (Requester.snapshot's cc parts). */
#define TN_RATE_LOG 100
struct tn_qp_cc {
    double rate_bps;
    double rate_cap_bps;          /* < 0: no rate feedback yet */
    double hpcc_rtt_s;            /* smallest RTT sample, < 0: none */
    double base_rtt_s;            /* HPCC's T now */
    double first_queue_s, first_cut_s;  /* < 0: not yet */
    uint64_t max_echo_queue_bytes;
    uint64_t echo_accepted;
    uint64_t echo_rejected[4];    /* psn_window, hop_count, queue_bytes, line_rate */
    uint32_t window_pkts;
    uint32_t n_rate_log;          /* entries in rate_log (the latest, oldest first) */
    uint64_t rate_changes;        /* every change since the start */
    double rate_log_t[TN_RATE_LOG], rate_log_v[TN_RATE_LOG];
    struct tn_hpcc hpcc;
    struct tn_dcqcn dcqcn;
};

/* One completion.  Requester: a message fully acknowledged.  Responder: a message
 * received whole (data is malloc'd when keep_data: release it with tn_free). */
struct tn_wc {
    uint64_t wr_id;         /* requester: as posted; responder: 0 */
    uint64_t msg_id;        /* 1, 2, ... per QP and direction */
    uint64_t byte_len;
    double posted_s;        /* requester: posted; responder: first packet delivered */
    double done_s;
    void *data;             /* responder with keep_data, else NULL */
    uint32_t qpn;
    uint32_t kind;          /* tn_wc_kind */
    uint32_t status;        /* 0 = success */
    uint32_t crc32;         /* zlib CRC-32 of the message bytes */
    uint32_t retx_pkts;     /* requester: retransmissions of its packets */
    uint32_t fec_repaired;  /* responder: packets rebuilt by FEC */
};

/* Per-QP counters: the same names and meaning as traffic.qp_types.QpCounters. */
struct tn_qp_counters {
    uint64_t tx_pkts, tx_bytes, tx_data_pkts, retx_pkts, retx_bytes, repair_pkts,
        timeouts, spurious_timeouts, naks_rx, acks_rx, cnps_rx, echo_acks, acked_bytes, msgs_done, rx_pkts,
        rx_data_pkts, delivered_bytes, duplicates, ooo_dropped, ooo_buffered, naks_tx,
        acks_tx, fec_repaired, fec_blocks_decoded, psn_out_of_window, bad_opcode,
        bad_length, wrong_peer;
};

/* Engine counters: traffic.endpoint.EndpointCounters plus the engine's own. */
struct tn_engine_counters {
    uint64_t rx_pkts, bad_icrc, truncated, bad_echo, unknown_qp, wrong_peer,
        unexpected_opcode, kernel_drops, cnps_tx, send_errors;
    uint64_t rx_batches, tx_batches, wakeups, spins, late_departures;
    double late_s;          /* sum of departure lateness beyond 20 us */
    uint64_t realtime;      /* 1: the engine thread runs SCHED_FIFO (TN_ENGINE_RT) */
    uint64_t injected_drops, injected_data_drops, injected_repair_drops;
    /* the timer's wake-up lateness (its running p99 estimate) and the spin lead last
     * chosen: the engine wakes this long before a departure and spins the rest (the p99
     * lateness + 5 us within the spin budget, the median lateness beyond it) */
    double timer_late_p99_s, spin_lead_s;
    double spin_s;          /* seconds spent spinning (the budget's spending) */
    double cpu_s;           /* the engine thread's CPU seconds (at the call) */
    double spin_budget;     /* share of a core the p99 lead may spin: < 0 no bound
                             * (TN_ENGINE_SPIN=1), 0 the median lead only (=0) */
    double budget_out_s;    /* seconds led by the median because the budget was spent,
                             * or the real-time thread near the kernel's limit (rt_guard) */
    double rx_poll_s;       /* seconds of passes that read the socket again instead of
                             * sleeping, while packets arrived every < 25 us, and found
                             * nothing (the receive poll; API version 4) */
    uint64_t tx_timestamps; /* paced sends whose kernel transmit timestamp was read ... */
    double wire_delay_s;    /* ... and how much later than the engine's clock read they
                             * left, summed (the pacer counts from the wire; version 4) */
    /* TN_ENGINE_GSO (version 5): sends of more than one frame and the frames they
     * carried; reads that returned coalesced frames and the frames they held */
    uint64_t gso_sends, gso_pkts, gro_reads, gro_pkts;
};

/* A QP's state for snapshots (Requester.snapshot / Responder.snapshot). */
struct tn_qp_state {
    double rate_bps, srtt_s, rto_s;   /* srtt_s < 0: no sample yet */
    uint64_t outstanding, una, next_seq, sent_up_to;
    uint32_t next_new_psn, expected_psn, msn, ooo_now;
    uint32_t fec_k, fec_m, window_pkts, idle;
    uint32_t sport, injected; /* injected: packets for this QP the loss emulation dropped */
    /* requester's RTT samples (one per ACK that newly acknowledges a never-retransmitted
     * packet: its first transmission to the ACK's arrival); < 0: none yet */
    double last_rtt_s, min_rtt_s;
    uint64_t rtt_samples;
    /* mode auto: data packets sent outside plan groups, those of them declared lost
     * (first transmissions), and such losses right after the one before in sequence
     * (traffic.recovery.LossEstimator's sent, lost, pairs) */
    uint64_t est_sent, est_lost, est_pairs;
};

/* A packet captured in step mode (what would have been sent). */
struct tn_out_pkt {
    uint32_t qpn;           /* the local QP whose socket sends it */
    uint32_t dst_ip;        /* network byte order */
    uint32_t len;
    uint8_t tos;
    uint8_t _pad[3];
    uint8_t buf[9216];      /* UDP payload (BTH .. ICRC) */
};

struct tn_engine *tn_engine_create(const struct tn_engine_attr *attr, char *err, size_t errlen);
int tn_engine_start(struct tn_engine *e);     /* start the engine thread (TN_ENGINE_THREAD) */
void tn_engine_destroy(struct tn_engine *e);  /* stops the thread, closes every socket */
const char *tn_last_error(struct tn_engine *e);
double tn_now(struct tn_engine *e);           /* seconds since the engine was created */

int tn_create_qp(struct tn_engine *e, const struct tn_qp_attr *attr); /* 0 or -1 */
int tn_post_write(struct tn_engine *e, uint32_t qpn, const void *buf, uint64_t len,
                  uint64_t wr_id);
int tn_post_send(struct tn_engine *e, uint32_t qpn, const void *buf, uint64_t len,
                 uint64_t wr_id);            /* SEND_ONLY: len <= mtu */
/* TN_MODE_AUTO: an RDMA WRITE sent as its plan says (the groups are copied) */
int tn_post_write_plan(struct tn_engine *e, uint32_t qpn, const void *buf, uint64_t len,
                       uint64_t wr_id, const struct tn_group *groups, uint32_t n_groups);
int tn_poll_cq(struct tn_engine *e, struct tn_wc *wc, int n); /* completions taken */
int tn_cq_fd(struct tn_engine *e);           /* readable while completions wait */
int tn_wait_cq(struct tn_engine *e, double timeout_s); /* 1: completions, 0: timeout */
void tn_free(void *data);

int tn_set_rate(struct tn_engine *e, uint32_t qpn, double rate_bps);
int tn_set_fec(struct tn_engine *e, uint32_t qpn, uint32_t k, uint32_t m);
/* The controller moved QP qpn's route: reset its retransmission backoff and, if it
 * is stalled, resend its oldest unacknowledged packets now.  1: resent, 0: only
 * rearmed, -1: no such QP (tn_last_error). */
int tn_path_changed(struct tn_engine *e, uint32_t qpn);
int tn_set_rx_delay(struct tn_engine *e, double delay_s); /* packets held keep theirs */
int tn_qp_counters(struct tn_engine *e, uint32_t qpn, struct tn_qp_counters *out);
int tn_qp_state(struct tn_engine *e, uint32_t qpn, struct tn_qp_state *out);
int tn_engine_counters(struct tn_engine *e, struct tn_engine_counters *out);
int tn_qp_idle(struct tn_engine *e, uint32_t qpn); /* 1 when every posted message is acked */
int tn_qp_cc(struct tn_engine *e, uint32_t qpn, struct tn_qp_cc *out);

/* Step mode. */
int tn_inject(struct tn_engine *e, uint32_t src_ip, uint16_t sport, const void *buf,
              uint32_t len, uint8_t tos, double now_s);
double tn_step(struct tn_engine *e, double now_s);  /* next due time, or -1 */
void tn_step_clock(struct tn_engine *e, double now_s); /* the time of the next API calls */
int tn_take_output(struct tn_engine *e, struct tn_out_pkt *out, int n);

/* checks for bindings: the API version the library was built with, the structs' sizes */
int tn_api_version(void);
size_t tn_sizeof(int which);

#ifdef __cplusplus
}
#endif
#endif
