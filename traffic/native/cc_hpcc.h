/* HPCC's per-ACK rate control at the sender (single rate and MultiRate).
 *
 * The same decisions, step for step and in the same floating-point order, as the
 * Python reference traffic/cc/hpcc.py (which follows the authors' ns-3 model); its
 * docstring explains the algorithm and the emulation-scale choices.  Units: seconds,
 * bit/s, bytes.  One struct per QP, owned by the caller: no globals, no allocation,
 * not thread-safe per struct (the engine calls it from the QP's thread).
 */
#ifndef TN_CC_HPCC_H
#define TN_CC_HPCC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TN_HPCC_MAX_HOPS 8   /* formats.int_md.MAX_HOPS */

/* One echoed INT hop record (formats.int_echo.EchoHop), fields as on the wire. */
struct tn_int_hop {
    uint32_t node_id;
    uint32_t egress_ts_us;    /* microseconds mod 2^32 */
    uint32_t tx_bytes;        /* mod 2^32 */
    uint32_t queue_bytes;
    uint32_t line_rate_mbps;  /* 0: the field was missing, the hop gives no sample */
};

/* traffic.cc.hpcc.HpccSettings; tn_hpcc_params_default() gives its defaults. */
struct tn_hpcc_params {
    double eta;                /* target utilisation, (0, 1] */
    uint32_t max_stage;        /* additive steps before a multiplicative one */
    double w_ai_fraction;      /* additive increase, fraction of the line rate */
    double min_rate_fraction;  /* lowest rate, fraction of the line rate */
    double base_rtt_s;         /* T; <= 0: the smallest RTT sample, at least ... */
    double min_base_rtt_s;     /* ... this */
    int multi_rate;            /* per-hop reference rates (ns-3 MULTI_RATE) */
    int fast_react;            /* react on every ACK, commit once per RTT */
    int update_once_per_t;     /* commit Rc at most once per T as well */
};

struct tn_hpcc_hop_state {     /* MultiRate: per hop */
    double u;
    double rc;
    uint32_t inc_stage;
};

struct tn_hpcc {
    struct tn_hpcc_params p;
    double max_rate_bps;
    double rate_bps;           /* what the QP paces at */
    double ref_rate_bps;       /* Rc, committed once per RTT */
    double u;                  /* EWMA of the normalised inflight */
    uint32_t inc_stage;
    int have_seq;              /* 0 until the first ACK */
    int64_t last_update_seq;
    double last_update_s;      /* NAN: none */
    uint64_t updates, fast_reacts, skipped_hops, path_changes;
    uint32_t n_hops;           /* the stored records of the previous ACK */
    struct tn_int_hop hops[TN_HPCC_MAX_HOPS];
    struct tn_hpcc_hop_state hop[TN_HPCC_MAX_HOPS];
};

void tn_hpcc_params_default(struct tn_hpcc_params *p);

/* 0, or -EINVAL when a parameter or the line rate is out of range (as HpccSettings). */
int tn_hpcc_init(struct tn_hpcc *s, const struct tn_hpcc_params *p, double max_rate_bps);

/* One ACK and its echoed hops (wire order).  ack_seq: first sequence not yet
 * acknowledged; next_seq: the next sequence the QP will send; base_rtt_s: T (see
 * tn_hpcc_base_rtt); now_s: the sender's clock, or NAN for ns-3's rule alone.
 * Returns 1 when rate_bps changed, 0 when not, -EINVAL for n_hops > TN_HPCC_MAX_HOPS. */
int tn_hpcc_on_ack(struct tn_hpcc *s, const struct tn_int_hop *hops, uint32_t n_hops,
                   int64_t ack_seq, int64_t next_seq, double base_rtt_s, double now_s);

/* T: the configured base RTT, else max(min_base_rtt_s, measured_s); measured_s <= 0
 * or NAN: no sample yet. */
double tn_hpcc_base_rtt(const struct tn_hpcc_params *p, double measured_s);

/* ns-3's variable window in bytes: rate_bps * T / 8. */
double tn_hpcc_window_bytes(const struct tn_hpcc *s, double base_rtt_s);

#ifdef __cplusplus
}
#endif
#endif
