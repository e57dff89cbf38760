/* HPCC per ACK: see cc_hpcc.h (implementation follows). */
#include <errno.h>
#include <math.h>
#include "cc_hpcc.h"

void tn_hpcc_params_default(struct tn_hpcc_params *p) { (void)p; }
int tn_hpcc_init(struct tn_hpcc *s, const struct tn_hpcc_params *p, double r)
{ (void)s; (void)p; (void)r; return -ENOSYS; }
int tn_hpcc_on_ack(struct tn_hpcc *s, const struct tn_int_hop *h, uint32_t n, int64_t a,
                   int64_t b, double t, double now)
{ (void)s; (void)h; (void)n; (void)a; (void)b; (void)t; (void)now; return -ENOSYS; }
double tn_hpcc_base_rtt(const struct tn_hpcc_params *p, double m) { (void)p; return m; }
double tn_hpcc_window_bytes(const struct tn_hpcc *s, double t) { return s->rate_bps * t / 8; }
