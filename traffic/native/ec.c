/* Erasure code with Intel ISA-L (see ec.h; the reference is traffic/fec.py).
 *
 * ISA-L computes over GF(2^8) with the polynomial 0x11D, as traffic/fec.py does, so
 * the same coefficients give the same bytes.  Encoding is one ec_encode_data call
 * with the m x k coefficient rows; decoding solves for the e missing data symbols
 * from the first e repair symbols present (the reference's choice; any choice gives
 * the same bytes) by folding the inverse of their e x e sub-matrix and the known data
 * symbols' contributions into one e x k matrix, again one ec_encode_data call.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "ec.h"

struct tn_ec {
    uint8_t coef[TN_EC_MAX_M][TN_EC_MAX_K];
    int enc_k, enc_m;  /* enc_tbls hold the tables of this (k, m); 0: none yet */
    uint8_t enc_tbls[32 * TN_EC_MAX_K * TN_EC_MAX_M];
    uint8_t mat[TN_EC_MAX_M * TN_EC_MAX_K];
    uint8_t a[TN_EC_MAX_M * TN_EC_MAX_M], ainv[TN_EC_MAX_M * TN_EC_MAX_M];
    uint8_t dec_tbls[32 * TN_EC_MAX_K * TN_EC_MAX_M];
};

uint8_t tn_ec_coefficient(int j, int i)
{
    if (j < 0 || j >= TN_EC_MAX_M || i < 0 || i >= TN_EC_MAX_K)
        return 0;
    /* cauchy(j, i) / cauchy(0, i) with cauchy(j, i) = 1 / ((128 + j) ^ i) */
    return gf_mul(gf_inv((uint8_t)((128 + j) ^ i)), (uint8_t)(128 ^ i));
}

struct tn_ec *tn_ec_new(void)
{
    struct tn_ec *ec = calloc(1, sizeof(*ec));
    if (!ec)
        return NULL;
    for (int j = 0; j < TN_EC_MAX_M; j++)
        for (int i = 0; i < TN_EC_MAX_K; i++)
            ec->coef[j][i] = tn_ec_coefficient(j, i);
    return ec;
}

void tn_ec_free(struct tn_ec *ec)
{
    free(ec);
}

static int bad_args(int k, int m, size_t len)
{
    return k < 1 || k > TN_EC_MAX_K || m < 0 || m > TN_EC_MAX_M || len > INT_MAX;
}

int tn_ec_encode(struct tn_ec *ec, int k, int m, size_t len,
                 const uint8_t *const *data, uint8_t *const *repair)
{
    if (bad_args(k, m, len))
        return TN_EC_EINVAL;
    if (m == 0 || len == 0)
        return 0;
    if (ec->enc_k != k || ec->enc_m != m) {
        for (int j = 0; j < m; j++)
            memcpy(&ec->mat[j * k], ec->coef[j], (size_t)k);
        ec_init_tables(k, m, ec->mat, ec->enc_tbls);
        ec->enc_k = k;
        ec->enc_m = m;
    }
    /* ISA-L's prototype is not const-qualified; it only reads data */
    ec_encode_data((int)len, k, m, ec->enc_tbls, (unsigned char **)data,
                   (unsigned char **)repair);
    return 0;
}

int tn_ec_decode(struct tn_ec *ec, int k, int m, size_t len,
                 const uint8_t *const *data, const uint8_t *const *repair,
                 uint8_t *const *out)
{
    if (bad_args(k, m, len))
        return TN_EC_EINVAL;
    int missing[TN_EC_MAX_M], known[TN_EC_MAX_K], rows[TN_EC_MAX_M];
    int e = 0, n_known = 0, n_rows = 0;
    for (int i = 0; i < k; i++) {
        if (data[i]) {
            known[n_known++] = i;
        } else {
            if (e == m)
                return TN_EC_ETOOFEW;
            missing[e++] = i;
        }
    }
    if (e == 0)
        return 0;
    for (int j = 0; j < m && n_rows < e; j++)
        if (repair[j])
            rows[n_rows++] = j;
    if (n_rows < e)
        return TN_EC_ETOOFEW;
    for (int r = 0; r < e; r++)
        for (int c = 0; c < e; c++)
            ec->a[r * e + c] = ec->coef[rows[r]][missing[c]];
    if (gf_invert_matrix(ec->a, ec->ainv, e) != 0)
        return TN_EC_ESINGULAR;
    if (len == 0)
        return e;
    /* sources: the known data symbols, then the e repair symbols */
    const uint8_t *src[TN_EC_MAX_K];
    uint8_t *dst[TN_EC_MAX_M];
    for (int s = 0; s < n_known; s++)
        src[s] = data[known[s]];
    for (int r = 0; r < e; r++)
        src[n_known + r] = repair[rows[r]];
    for (int c = 0; c < e; c++) {
        uint8_t *row = &ec->mat[c * k];
        const uint8_t *inv = &ec->ainv[c * e];
        for (int s = 0; s < n_known; s++) {
            uint8_t v = 0;
            for (int r = 0; r < e; r++)
                v ^= gf_mul(inv[r], ec->coef[rows[r]][known[s]]);
            row[s] = v;
        }
        for (int r = 0; r < e; r++)
            row[n_known + r] = inv[r];
        dst[c] = out[missing[c]];
    }
    ec_init_tables(k, e, ec->mat, ec->dec_tbls);
    ec_encode_data((int)len, k, e, ec->dec_tbls, (unsigned char **)src, dst);
    return e;
}

int tn_ec_encode_packed(struct tn_ec *ec, int k, int m, size_t len,
                        const uint8_t *data, uint8_t *repair)
{
    if (bad_args(k, m, len))
        return TN_EC_EINVAL;
    const uint8_t *d[TN_EC_MAX_K];
    uint8_t *r[TN_EC_MAX_M];
    for (int i = 0; i < k; i++)
        d[i] = data + (size_t)i * len;
    for (int j = 0; j < m; j++)
        r[j] = repair + (size_t)j * len;
    return tn_ec_encode(ec, k, m, len, d, r);
}

int tn_ec_decode_packed(struct tn_ec *ec, int k, int m, size_t len,
                        uint8_t *data, const uint8_t *data_present,
                        const uint8_t *repair, const uint8_t *repair_present)
{
    if (bad_args(k, m, len))
        return TN_EC_EINVAL;
    const uint8_t *d[TN_EC_MAX_K], *r[TN_EC_MAX_M];
    uint8_t *out[TN_EC_MAX_K];
    for (int i = 0; i < k; i++) {
        out[i] = data + (size_t)i * len;
        d[i] = data_present[i] ? out[i] : NULL;
    }
    for (int j = 0; j < m; j++)
        r[j] = repair_present[j] ? repair + (size_t)j * len : NULL;
    return tn_ec_decode(ec, k, m, len, d, r, out);
}
