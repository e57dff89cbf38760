/* DCQCN's reaction point (see cc_dcqcn.h and the reference traffic/cc/dcqcn.py with
 * traffic/cc/dcqcn_engine.py's DcqcnEngine, here for one flow).
 *
 * Every expression keeps the reference's operand order, so with the Makefile's
 * -ffp-contract=off the doubles round exactly as Python's do; seconds become
 * nanoseconds by round-half-to-even as Python's round() does (llrint in the default
 * rounding mode).
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cc_dcqcn.h"

#define MIN_RATE_BPS 1000.0      /* traffic.pacing's lower bound */
#define MAX_EVENTS 256           /* increase events applied after an idle period */
#define LONG_AGO_NS (INT64_MIN / 2)

static int64_t ns(double t_s) { return llrint(t_s * 1e9); }

void tn_dcqcn_params_default(struct tn_dcqcn_params *p)
{
    p->timer_s = 55e-6 * 1000.0;         /* traffic.cc.dcqcn.TIME_SCALE */
    p->alpha_interval_s = 55e-6 * 1000.0;
    p->cnp_interval_s = 50e-6 * 1000.0;
    p->decrease_interval_s = 4e-6 * 1000.0;
    p->byte_counter_s = 0.1;
    p->g = 1.0 / 256;
    p->fast_recovery_stages = 5;
    p->rate_ai_fraction = 0.001;
    p->rate_hai_fraction = 0.01;
    p->min_rate_fraction = 0.001;
    p->initial_alpha = 1.0;
}

static int in(double v, double lo, double hi) { return v >= lo && v <= hi; }

int tn_dcqcn_init(struct tn_dcqcn *s, const struct tn_dcqcn_params *p, double line_rate_bps,
                  uint32_t mtu, double now_s)
{
    if (!in(p->timer_s, 1e-4, 600) || !in(p->alpha_interval_s, 1e-4, 600) ||
        !in(p->byte_counter_s, 1e-4, 600) || !in(p->cnp_interval_s, 0, 600) ||
        !in(p->decrease_interval_s, 0, 600) || !in(p->g, 0, 1) ||
        !in(p->rate_ai_fraction, 0, 1) || !in(p->rate_hai_fraction, 0, 1) ||
        !in(p->min_rate_fraction, 0, 1) || !in(p->initial_alpha, 0, 1) ||
        p->fast_recovery_stages > 1000 || !in(line_rate_bps, MIN_RATE_BPS, 4e11))
        return -EINVAL;
    memset(s, 0, sizeof(*s));
    s->p = *p;
    s->line_rate_bps = line_rate_bps;
    int64_t bc = llrint(line_rate_bps / 8 * p->byte_counter_s);
    s->byte_counter_bytes = bc > 2 * (int64_t)mtu ? bc : 2 * (int64_t)mtu;
    if (s->byte_counter_bytes <= 0)
        return -EINVAL;
    int64_t now_ns = ns(now_s);
    s->rate_bps = s->target_bps = line_rate_bps;
    s->alpha = p->initial_alpha;
    s->alpha_deadline_ns = now_ns + ns(p->alpha_interval_s);
    s->timer_deadline_ns = now_ns + ns(p->timer_s);
    s->last_decrease_ns = LONG_AGO_NS;
    s->now_s = now_s;
    s->last_cnp_s = -INFINITY;
    s->min_rate_seen_bps = line_rate_bps;
    s->due_ns = s->alpha_deadline_ns < s->timer_deadline_ns ? s->alpha_deadline_ns
                                                            : s->timer_deadline_ns;
    s->bytes_due = s->byte_counter_bytes;
    return 0;
}

double tn_dcqcn_rate_bps(const struct tn_dcqcn *s)
{
    return s->rate_bps > MIN_RATE_BPS ? s->rate_bps : MIN_RATE_BPS;
}

void tn_dcqcn_on_sent(struct tn_dcqcn *s, uint64_t nbytes)
{
    s->unsent += (int64_t)nbytes;
}

/* `events` increase events, each bumping *stage (the timer's or the byte counter's). */
static void increase_events(struct tn_dcqcn *s, int64_t events, int64_t *stage)
{
    const struct tn_dcqcn_params *p = &s->p;
    const int64_t fr = p->fast_recovery_stages;
    const double mr = s->line_rate_bps;
    /* each event halves the distance to the target: past 256 only the stages count */
    int64_t left = events < MAX_EVENTS ? events : MAX_EVENTS;
    *stage += events - left;
    for (; left > 0; left--) {
        *stage += 1;
        int64_t ts = s->timer_stage, bs = s->byte_stage;
        int64_t hi = ts > bs ? ts : bs, lo = ts < bs ? ts : bs;
        double rt = s->target_bps;
        if (lo > fr)
            rt = rt + (double)(lo - fr) * p->rate_hai_fraction * mr;
        else if (hi >= fr)
            rt = rt + p->rate_ai_fraction * mr;
        if (mr < rt)
            rt = mr;
        s->target_bps = rt;
        double r = (s->rate_bps + rt) / 2.0;
        s->rate_bps = mr < r ? mr : r;
    }
}

static void engine_on_sent(struct tn_dcqcn *s, int64_t nbytes)
{
    int64_t count = s->byte_count + nbytes;
    int64_t events = count / s->byte_counter_bytes;
    s->byte_count = count % s->byte_counter_bytes;
    increase_events(s, events, &s->byte_stage);
}

static void engine_advance(struct tn_dcqcn *s, int64_t now_ns)
{
    const struct tn_dcqcn_params *p = &s->p;
    int64_t a = ns(p->alpha_interval_s);
    if (s->alpha_deadline_ns <= now_ns) {
        int64_t n_exp = (now_ns - s->alpha_deadline_ns) / a + 1;
        s->alpha *= pow(1.0 - p->g, (double)n_exp);
        s->alpha_deadline_ns += n_exp * a;
    }
    int64_t t = ns(p->timer_s);
    if (s->timer_deadline_ns <= now_ns) {
        int64_t events = (now_ns - s->timer_deadline_ns) / t + 1;
        s->timer_deadline_ns += events * t;
        increase_events(s, events, &s->timer_stage);
    }
}

static void engine_on_cnp(struct tn_dcqcn *s, int64_t now_ns)
{
    const struct tn_dcqcn_params *p = &s->p;
    s->cnps_seen++;
    if (now_ns - s->last_decrease_ns >= ns(p->decrease_interval_s)) {
        s->target_bps = s->rate_bps;
        double lo = s->line_rate_bps * p->min_rate_fraction;
        double r = s->rate_bps * (1.0 - s->alpha / 2.0);
        s->rate_bps = lo > r ? lo : r;   /* numpy.maximum(lo, r) */
        s->timer_stage = s->byte_stage = s->byte_count = 0;
        s->timer_deadline_ns = now_ns + ns(p->timer_s);
        s->last_decrease_ns = now_ns;
        s->decreases++;
    }
    s->alpha = (1.0 - p->g) * s->alpha + p->g;
    s->alpha_deadline_ns = now_ns + ns(p->alpha_interval_s);
}

static void refresh(struct tn_dcqcn *s)
{
    s->due_ns = s->alpha_deadline_ns < s->timer_deadline_ns ? s->alpha_deadline_ns
                                                            : s->timer_deadline_ns;
    s->bytes_due = s->byte_counter_bytes - s->byte_count;
}

/* Give the engine the bytes sent so far, then fire its due timers. */
static void update(struct tn_dcqcn *s, double now_s)
{
    s->now_s = now_s;
    if (s->unsent) {
        engine_on_sent(s, s->unsent);
        s->unsent = 0;
    }
    engine_advance(s, ns(now_s));
}

int tn_dcqcn_tick(struct tn_dcqcn *s, double now_s)
{
    if (ns(now_s) < s->due_ns && s->unsent < s->bytes_due)
        return 0;
    double before = s->rate_bps;
    update(s, now_s);
    refresh(s);
    if (s->rate_bps > before)
        s->rate_increases++;
    return s->rate_bps != before;
}

int tn_dcqcn_on_cnp(struct tn_dcqcn *s, double now_s)
{
    s->cnps_rx++;
    if (now_s - s->last_cnp_s < s->p.cnp_interval_s)
        return 0;
    s->last_cnp_s = now_s;
    s->cnps_applied++;
    double before = s->rate_bps;
    update(s, now_s);
    uint64_t cuts = s->decreases;
    engine_on_cnp(s, ns(now_s));
    s->rate_cuts += s->decreases - cuts;
    refresh(s);
    if (s->rate_bps < s->min_rate_seen_bps)
        s->min_rate_seen_bps = s->rate_bps;
    return s->rate_bps != before;
}
