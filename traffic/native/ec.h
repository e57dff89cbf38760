/* Systematic erasure code over GF(2^8) with Intel ISA-L: k data + m repair symbols.
 *
 * The SAME code as traffic/fec.py so both ends interoperate on the wire: polynomial
 * 0x11D, repair j = sum_i C[j][i] d_i with the normalised Cauchy matrix
 * C[j][i] = (128 ^ i) / ((128 + j) ^ i) (row 0 all ones: repair 0 is the XOR).
 * C[j][i] does not depend on k or m, so k and m may change from block to block.
 * A context holds the coefficient table, the encode tables of the last (k, m) and
 * the decode scratch: one per thread, made once; encode and decode allocate nothing.
 */
#ifndef TN_EC_H
#define TN_EC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TN_EC_MAX_K 128  /* traffic.fec.MAX_K */
#define TN_EC_MAX_M 16   /* traffic.fec.MAX_M */

/* Return codes (negative). */
#define TN_EC_EINVAL    (-1)  /* k outside 1..MAX_K, m outside 0..MAX_M, or len > INT_MAX */
#define TN_EC_ETOOFEW   (-2)  /* fewer than k of the k + m symbols present */
#define TN_EC_ESINGULAR (-3)  /* cannot happen with a Cauchy matrix; reported, not assumed */

struct tn_ec;

struct tn_ec *tn_ec_new(void);   /* NULL when out of memory */
void tn_ec_free(struct tn_ec *ec);

/* C[j][i] of traffic.fec.coefficients (0 <= j < MAX_M, 0 <= i < MAX_K). */
uint8_t tn_ec_coefficient(int j, int i);

/* repair[0..m-1] (len bytes each) from data[0..k-1] (len bytes each).  0 or < 0. */
int tn_ec_encode(struct tn_ec *ec, int k, int m, size_t len,
                 const uint8_t *const *data, uint8_t *const *repair);

/* Recover the missing data symbols of a block.  data[i] NULL: missing; repair[j]
 * NULL: missing.  For every missing i, out[i] (len bytes) receives the symbol; other
 * out[] entries are not touched (may be NULL).  Returns how many were recovered
 * (0 when none was missing), or TN_EC_ETOOFEW / TN_EC_EINVAL / TN_EC_ESINGULAR. */
int tn_ec_decode(struct tn_ec *ec, int k, int m, size_t len,
                 const uint8_t *const *data, const uint8_t *const *repair,
                 uint8_t *const *out);

/* The same on packed blocks (symbol i at i * len), for callers that keep a block in
 * one buffer (and for Python, where one buffer is one cheap argument).  decode writes
 * the missing data symbols in place; *_present[i] non-zero: symbol i arrived. */
int tn_ec_encode_packed(struct tn_ec *ec, int k, int m, size_t len,
                        const uint8_t *data, uint8_t *repair);
int tn_ec_decode_packed(struct tn_ec *ec, int k, int m, size_t len,
                        uint8_t *data, const uint8_t *data_present,
                        const uint8_t *repair, const uint8_t *repair_present);

#ifdef __cplusplus
}
#endif
#endif
