/* HPCC per ACK (see cc_hpcc.h and the reference traffic/cc/hpcc.py).
 *
 * Every expression keeps the reference's operand order, so with the Makefile's
 * -ffp-contract=off the doubles round exactly as Python's do.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cc_hpcc.h"

void tn_hpcc_params_default(struct tn_hpcc_params *p)
{
    p->eta = 0.95;
    p->max_stage = 5;
    p->w_ai_fraction = 0.01;
    p->min_rate_fraction = 0.001;
    p->base_rtt_s = 0.0;
    p->min_base_rtt_s = 0.03;
    p->multi_rate = 0;
    p->fast_react = 1;
    p->update_once_per_t = 1;
}

int tn_hpcc_init(struct tn_hpcc *s, const struct tn_hpcc_params *p, double max_rate_bps)
{
    if (!(p->eta > 0.0 && p->eta <= 1.0) || p->max_stage > 1000 ||
        !(p->w_ai_fraction >= 0.0 && p->w_ai_fraction <= 1.0) ||
        !(p->min_rate_fraction >= 0.0 && p->min_rate_fraction <= 1.0) ||
        !(p->base_rtt_s <= 0.0 || (p->base_rtt_s >= 1e-6 && p->base_rtt_s <= 60)) ||
        !(p->min_base_rtt_s >= 1e-6 && p->min_base_rtt_s <= 60) || !(max_rate_bps > 0.0))
        return -EINVAL;
    memset(s, 0, sizeof(*s));
    s->p = *p;
    s->max_rate_bps = max_rate_bps;
    s->rate_bps = s->ref_rate_bps = max_rate_bps;
    s->u = 1.0;
    s->last_update_s = NAN;
    for (int i = 0; i < TN_HPCC_MAX_HOPS; i++) {
        s->hop[i].u = 1.0;
        s->hop[i].rc = max_rate_bps;
    }
    return 0;
}

double tn_hpcc_base_rtt(const struct tn_hpcc_params *p, double measured_s)
{
    if (p->base_rtt_s > 0.0)
        return p->base_rtt_s;
    if (!(measured_s > p->min_base_rtt_s))  /* also no sample (<= 0, NAN) */
        return p->min_base_rtt_s;
    return measured_s;
}

double tn_hpcc_window_bytes(const struct tn_hpcc *s, double base_rtt_s)
{
    return s->rate_bps * base_rtt_s / 8;
}

static void store_hops(struct tn_hpcc *s, const struct tn_int_hop *hops, uint32_t n)
{
    memcpy(s->hops, hops, n * sizeof(*hops));
    s->n_hops = n;
}

static double bound(const struct tn_hpcc *s, double r)
{
    double lo = s->p.min_rate_fraction * s->max_rate_bps;
    double v = r > lo ? r : lo;       /* Python max(lo, r) */
    return v < s->max_rate_bps ? v : s->max_rate_bps;
}

/* The rate one hop (or the whole path) proposes from its reference rate, utilisation
 * and stage.  c = u / eta is 0 only when the hop sent nothing and had no queue over a
 * whole T (MultiRate): the formula's limit there, rc / c -> infinity, is the line rate. */
static double propose(const struct tn_hpcc *s, double rc, double u, uint32_t stage,
                      uint32_t *new_stage)
{
    double w_ai = s->p.w_ai_fraction * s->max_rate_bps;
    double c = u / s->p.eta;
    double r;
    if (c >= 1 || stage >= s->p.max_stage) {
        r = c > 0 ? rc / c + w_ai : s->max_rate_bps;
        *new_stage = 0;
    } else {
        r = rc + w_ai;
        *new_stage = stage + 1;
    }
    return bound(s, r);
}

/* u and tau (seconds) of one hop from this ACK's record h and the previous one p;
 * 0 when the pair gives no sample (same timestamp, or no line rate). */
static int hop_u(struct tn_hpcc *s, const struct tn_int_hop *h, const struct tn_int_hop *p,
                 double t, double *u, double *tau)
{
    uint32_t tau_us = h->egress_ts_us - p->egress_ts_us;   /* mod 2^32 */
    if (tau_us == 0 || h->line_rate_mbps == 0) {
        s->skipped_hops++;
        return 0;
    }
    *tau = (double)tau_us * 1e-6;
    double b = (double)h->line_rate_mbps * 1e6;
    uint64_t dtx = (uint32_t)(h->tx_bytes - p->tx_bytes);  /* mod 2^32 */
    double tx_rate = (double)(dtx * 8) / *tau;
    double win = s->max_rate_bps * t / 8;
    uint32_t q = h->queue_bytes < p->queue_bytes ? h->queue_bytes : p->queue_bytes;
    *u = tx_rate / b + (double)q * s->max_rate_bps / b / win;
    return 1;
}

static void update_single(struct tn_hpcc *s, const struct tn_int_hop *hops, uint32_t n,
                          double t, int commit)
{
    double big_u = 0.0, dt = 0.0;
    int any = 0;
    for (uint32_t i = 0; i < n; i++) {
        double u, tau;
        if (!hop_u(s, &hops[i], &s->hops[i], t, &u, &tau))
            continue;
        any = 1;
        if (u > big_u) {
            big_u = u;
            dt = tau;
        }
    }
    store_hops(s, hops, n);
    if (!any)
        return;
    if (t < dt)
        dt = t;
    s->u = (s->u * (t - dt) + big_u * dt) / t;
    uint32_t stage;
    s->rate_bps = propose(s, s->ref_rate_bps, s->u, s->inc_stage, &stage);
    if (commit) {
        s->ref_rate_bps = s->rate_bps;
        s->inc_stage = stage;
    }
}

static void update_multi(struct tn_hpcc *s, const struct tn_int_hop *hops, uint32_t n,
                         double t, int commit)
{
    int updated[TN_HPCC_MAX_HOPS];
    int any = 0;
    for (uint32_t i = 0; i < n; i++) {
        double u, tau;
        updated[i] = hop_u(s, &hops[i], &s->hops[i], t, &u, &tau);
        if (updated[i]) {
            any = 1;
            if (t < tau)
                tau = t;
            s->hop[i].u = (s->hop[i].u * (t - tau) + u * tau) / t;
        }
    }
    store_hops(s, hops, n);
    if (!any)
        return;
    double new_rate = s->max_rate_bps;
    double r[TN_HPCC_MAX_HOPS];
    uint32_t stage[TN_HPCC_MAX_HOPS];
    for (uint32_t i = 0; i < n; i++) {
        struct tn_hpcc_hop_state *st = &s->hop[i];
        if (!updated[i]) {
            if (st->rc < new_rate)
                new_rate = st->rc;
            continue;
        }
        r[i] = propose(s, st->rc, st->u, st->inc_stage, &stage[i]);
        if (r[i] < new_rate)
            new_rate = r[i];
    }
    s->rate_bps = new_rate;
    if (commit) {
        s->ref_rate_bps = new_rate;
        for (uint32_t i = 0; i < n; i++) {
            if (updated[i]) {
                s->hop[i].rc = r[i];
                s->hop[i].inc_stage = stage[i];
            }
        }
    }
}

int tn_hpcc_on_ack(struct tn_hpcc *s, const struct tn_int_hop *hops, uint32_t n_hops,
                   int64_t ack_seq, int64_t next_seq, double base_rtt_s, double now_s)
{
    if (n_hops > TN_HPCC_MAX_HOPS)
        return -EINVAL;
    if (!s->have_seq) {
        s->have_seq = 1;
        s->last_update_seq = next_seq;
        s->last_update_s = now_s;
        store_hops(s, hops, n_hops);
        return 0;
    }
    int same_path = n_hops == s->n_hops;
    for (uint32_t i = 0; same_path && i < n_hops; i++)
        same_path = hops[i].node_id == s->hops[i].node_id;
    if (!same_path) {
        s->path_changes++;
        store_hops(s, hops, n_hops);
        return 0;
    }
    int full = ack_seq > s->last_update_seq;
    if (full && !isnan(now_s) && s->p.update_once_per_t && !isnan(s->last_update_s) &&
        now_s - s->last_update_s < base_rtt_s)
        full = 0;
    if (!full && !s->p.fast_react)
        return 0;
    double before = s->rate_bps;
    if (s->p.multi_rate)
        update_multi(s, hops, n_hops, base_rtt_s, full);
    else
        update_single(s, hops, n_hops, base_rtt_s, full);
    if (full) {
        s->updates++;
        if (next_seq > s->last_update_seq)
            s->last_update_seq = next_seq;
        s->last_update_s = now_s;
    } else {
        s->fast_reacts++;
    }
    return s->rate_bps != before;
}
