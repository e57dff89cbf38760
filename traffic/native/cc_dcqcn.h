/* DCQCN's reaction point (the sender side of one QP), per CNP, timer and byte count.
 *
 * The same decisions, in the same floating-point order, as the Python reference
 * traffic/cc/dcqcn.py (DcqcnReactionPoint around traffic/cc/dcqcn_engine.py's
 * DcqcnEngine); its docstring gives the emulation-scale constants.  Time is the caller's clock in
 * seconds, converted to integer nanoseconds as the reference does (round half to
 * even).  One struct per QP, owned by the caller: no globals, no allocation.
 */
#ifndef TN_CC_DCQCN_H
#define TN_CC_DCQCN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* traffic.cc.dcqcn.DcqcnSettings; tn_dcqcn_params_default() gives its defaults. */
struct tn_dcqcn_params {
    double timer_s;              /* rate-increase timer T */
    double alpha_interval_s;     /* alpha timer K */
    double cnp_interval_s;       /* at most one CNP taken per this */
    double decrease_interval_s;  /* at most one cut per this */
    double byte_counter_s;       /* byte counter B, in seconds of line rate */
    double g;
    uint32_t fast_recovery_stages;  /* F */
    double rate_ai_fraction;     /* of the line rate */
    double rate_hai_fraction;
    double min_rate_fraction;
    double initial_alpha;        /* 1.0 */
};

struct tn_dcqcn {
    struct tn_dcqcn_params p;
    double line_rate_bps;
    int64_t byte_counter_bytes;  /* max(2 mtu, line rate x byte_counter_s / 8) */
    /* engine state */
    double rate_bps, target_bps, alpha;
    int64_t timer_stage, byte_stage, byte_count;
    int64_t alpha_deadline_ns, timer_deadline_ns, last_decrease_ns;
    uint64_t cnps_seen, decreases;
    /* reaction point */
    double now_s, last_cnp_s, min_rate_seen_bps;
    uint64_t cnps_rx, cnps_applied, rate_cuts, rate_increases;
    int64_t unsent;              /* bytes sent, not yet given to the engine */
    int64_t due_ns;              /* earliest alpha / increase deadline */
    int64_t bytes_due;           /* bytes until the next byte-counter event */
};

void tn_dcqcn_params_default(struct tn_dcqcn_params *p);

/* Start at line rate at time now_s.  0, or -EINVAL when out of range (as DcqcnSettings). */
int tn_dcqcn_init(struct tn_dcqcn *s, const struct tn_dcqcn_params *p, double line_rate_bps,
                  uint32_t mtu, double now_s);

/* The QP put nbytes on the wire (counted; given to the engine when due). */
void tn_dcqcn_on_sent(struct tn_dcqcn *s, uint64_t nbytes);

/* Run the timers and byte counter if one is due; 1 when the rate changed, else 0. */
int tn_dcqcn_tick(struct tn_dcqcn *s, double now_s);

/* A CNP arrived; 1 when it changed the rate, else 0. */
int tn_dcqcn_on_cnp(struct tn_dcqcn *s, double now_s);

/* The rate to pace at: never below the pacer's minimum of 1000 bit/s. */
double tn_dcqcn_rate_bps(const struct tn_dcqcn *s);

#ifdef __cplusplus
}
#endif
#endif
