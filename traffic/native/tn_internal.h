/* tn_internal.h - shared declarations of the engine's own files (not public).
 *
 * tn_wire.c: RoCEv2 headers and the ICRC; tn_qp.c: the requester and responder state
 * machines (ports of traffic/requester.py and traffic/responder.py, rule for rule, so
 * that differential tests can compare them packet by packet); tn_engine.c: sockets,
 * the loop, pacing waits, completions and the public API.
 */
#ifndef TN_INTERNAL_H
#define TN_INTERNAL_H

#include <stdint.h>
#include <stddef.h>
#include "tn_verbs.h"

#define TN_BTH 12
#define TN_RETH 16
#define TN_AETH 4
#define TN_ICRC 4
#define TN_FEC_HDR 8
#define TN_SYM_HDR 20
#define TN_SACK_HDR 4
#define TN_PSN_MASK 0xFFFFFFu
#define TN_WIRE_OVERHEAD 42  /* Ethernet + IPv4 + UDP around each UDP payload */
#define TN_MAX_PKT 9216
#define TN_MAX_HOPS 8

enum {
    OP_SEND_ONLY = 0x04, OP_WRITE_FIRST = 0x06, OP_WRITE_MIDDLE = 0x07,
    OP_WRITE_LAST = 0x08, OP_WRITE_ONLY = 0x0A, OP_ACK = 0x11, OP_CNP = 0x81,
    OP_FEC_REPAIR = 0xC0,
};
#define SYN_ACK 0x1F
#define SYN_NAK_SEQ 0x60

static inline int op_is_data(int op)
{
    return op == OP_SEND_ONLY || op == OP_WRITE_FIRST || op == OP_WRITE_MIDDLE ||
           op == OP_WRITE_LAST || op == OP_WRITE_ONLY;
}
static inline int op_has_reth(int op) { return op == OP_WRITE_FIRST || op == OP_WRITE_ONLY; }
static inline int op_is_last(int op)
{
    return op == OP_WRITE_LAST || op == OP_WRITE_ONLY || op == OP_SEND_ONLY;
}
static inline int op_is_first(int op)
{
    return op == OP_WRITE_FIRST || op == OP_WRITE_ONLY || op == OP_SEND_ONLY;
}
static inline int32_t psn_diff(uint32_t a, uint32_t b)
{
    uint32_t d = (a - b) & TN_PSN_MASK;
    return d >= 0x800000u ? (int32_t)d - 0x1000000 : (int32_t)d;
}
static inline void put16(uint8_t *p, uint32_t v) { p[0] = v >> 8; p[1] = v; }
static inline void put32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}
static inline void put64(uint8_t *p, uint64_t v) { put32(p, v >> 32); put32(p + 4, (uint32_t)v); }
static inline uint32_t get16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static inline uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

/* -- wire (tn_wire.c) ---------------------------------------------------------------- */
uint32_t tn_crc32(uint32_t crc, const void *buf, size_t n);  /* zlib-compatible */
/* write the ICRC into the last 4 bytes of buf (a whole UDP payload of n bytes) */
void tn_icrc_finish(uint8_t *buf, uint32_t n, uint32_t src, uint32_t dst, uint16_t sport,
                    uint16_t dport);
int tn_icrc_ok(const uint8_t *buf, uint32_t n, uint32_t src, uint32_t dst, uint16_t sport,
               uint16_t dport);
void tn_pack_bth(uint8_t *p, int op, uint32_t dqp, uint32_t psn, int ack_req, int becn);

/* a parsed UDP payload (views into the buffer) */
struct tn_pkt {
    int op;
    uint32_t dqp, psn;
    int has_reth, has_aeth, has_sack, has_fec;
    uint64_t va; uint32_t rkey, dma_len;
    uint32_t syndrome, msn;
    uint32_t sack_base; const uint8_t *sack_bits; uint32_t sack_len;
    uint32_t fk, fm, findex, fslen, fcount, fstride;
    const uint8_t *payload; uint32_t plen;
    const uint8_t *reth_raw;
};
int tn_parse(const uint8_t *buf, uint32_t n, struct tn_pkt *p); /* 0 or -1 (truncated) */

struct tn_hop {
    uint32_t node_id, egress_ts, tx_bytes, queue_bytes, line_rate;
};

/* -- QPs (tn_qp.c) ------------------------------------------------------------------ */
struct tn_qp;
struct tn_out {        /* where a QP's packets go */
    uint8_t *bufs;     /* n slots of TN_MAX_PKT bytes */
    uint32_t *lens;
    int n, cap;
};
struct tn_cq_sink {    /* where completions go */
    void (*push)(void *ctx, const struct tn_wc *wc);
    void *ctx;
};

struct tn_qp *tn_qp_new(const struct tn_qp_attr *a, uint32_t local_ip, uint16_t sport,
                        uint16_t dport, double now, char *err, size_t errlen);
void tn_qp_free(struct tn_qp *q);
uint32_t tn_qp_qpn(const struct tn_qp *q);
uint32_t tn_qp_peer_ip(const struct tn_qp *q);
int tn_qp_role(const struct tn_qp *q);
int tn_qp_post(struct tn_qp *q, int op, const void *buf, uint64_t len, uint64_t wr_id,
               const struct tn_group *groups, uint32_t n_groups, double now, char *err,
               size_t errlen);
/* requester: packets due now into out (at most budget); returns next wake (or -1) */
double tn_qp_poll(struct tn_qp *q, double now, struct tn_out *out, int budget,
                  struct tn_cq_sink *cq, int timers);
/* requester: its last paced departure left the driver at ``t`` (a transmit timestamp,
 * at or after the engine's clock read): the catch-up bound counts from there; returns
 * how much later than the engine's read (0: not taken) */
double tn_qp_wire_departure(struct tn_qp *q, double t);
/* ... worth reading: the catch-up bound binds the next packet (its gap > catchup_s) */
int tn_qp_wants_wire_time(const struct tn_qp *q);
void tn_qp_on_ack(struct tn_qp *q, const struct tn_pkt *p, double now, struct tn_cq_sink *cq);
void tn_qp_on_echo(struct tn_qp *q, const struct tn_hop *hops, int n, const struct tn_pkt *p,
                   double now);
void tn_qp_on_cnp(struct tn_qp *q, double now);
/* DCQCN: its next timer while the pacer holds a packet back (a rate increase may let it
 * go sooner), else -1; the threaded engine wakes for it, step mode leaves it out */
double tn_qp_cc_wake(const struct tn_qp *q);
/* responder */
void tn_qp_on_packet(struct tn_qp *q, const struct tn_pkt *p, double now,
                     struct tn_cq_sink *cq);
int tn_qp_take_ack(struct tn_qp *q, uint8_t *buf); /* bytes written, 0 when none owed */
int tn_qp_set_rate(struct tn_qp *q, double rate, double now, char *err, size_t errlen);
int tn_qp_path_changed(struct tn_qp *q, double now);
int tn_qp_set_fec(struct tn_qp *q, uint32_t k, uint32_t m, double now, char *err,
                  size_t errlen);
void tn_qp_get_counters(const struct tn_qp *q, struct tn_qp_counters *c);
void tn_qp_get_state(const struct tn_qp *q, struct tn_qp_state *s);
int tn_qp_is_idle(const struct tn_qp *q);
uint32_t tn_qp_tos(const struct tn_qp *q);

uint32_t tn_qp_peer_qpn(const struct tn_qp *q);
void tn_qp_get_cc(const struct tn_qp *q, struct tn_qp_cc *out);

#endif
