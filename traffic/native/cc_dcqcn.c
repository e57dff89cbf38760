/* DCQCN reaction point: see cc_dcqcn.h (implementation follows). */
#include <errno.h>
#include "cc_dcqcn.h"

void tn_dcqcn_params_default(struct tn_dcqcn_params *p) { (void)p; }
int tn_dcqcn_init(struct tn_dcqcn *s, const struct tn_dcqcn_params *p, double r, uint32_t mtu,
                  double now) { (void)s; (void)p; (void)r; (void)mtu; (void)now; return -ENOSYS; }
void tn_dcqcn_on_sent(struct tn_dcqcn *s, uint64_t n) { s->unsent += (int64_t)n; }
int tn_dcqcn_tick(struct tn_dcqcn *s, double now) { (void)s; (void)now; return -ENOSYS; }
int tn_dcqcn_on_cnp(struct tn_dcqcn *s, double now) { (void)s; (void)now; return -ENOSYS; }
double tn_dcqcn_rate_bps(const struct tn_dcqcn *s) { return s->rate_bps; }
