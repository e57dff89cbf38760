/* tn_wire.c - RoCEv2 headers, parsing and the ICRC (formats/roce/ in C).
 *
 * ICRC: CRC-32 over 8 bytes of 0xFF, the IPv4 header with TOS, TTL and checksum all
 * ones, the UDP header with its checksum all ones, the BTH with resv8a all ones, and
 * the rest up to the ICRC, written least significant byte first.  The kernel sends
 * IP ID 0 with DF (IP_PMTUDISC_DO), so the sender knows every covered field.  CRC-32
 * is ISA-L's crc32_gzip_refl (the zlib CRC, with carry-less multiply).
 */
#include <string.h>
#include <isa-l/crc.h>
#include "tn_internal.h"

uint32_t tn_crc32(uint32_t crc, const void *buf, size_t n)
{
    return crc32_gzip_refl(crc, (const unsigned char *)buf, (uint64_t)n);
}

static uint32_t icrc_of(const uint8_t *buf, uint32_t n, uint32_t src, uint32_t dst,
                        uint16_t sport, uint16_t dport)
{
    uint8_t h[8 + 28 + TN_BTH];
    memset(h, 0xFF, 8);
    uint8_t *ip = h + 8;
    uint32_t total = 28 + n;
    ip[0] = 0x45; ip[1] = 0xFF; put16(ip + 2, total); put16(ip + 4, 0);
    put16(ip + 6, 0x4000); ip[8] = 0xFF; ip[9] = 17; ip[10] = 0xFF; ip[11] = 0xFF;
    memcpy(ip + 12, &src, 4); memcpy(ip + 16, &dst, 4);
    uint8_t *udp = ip + 20;
    put16(udp, sport); put16(udp + 2, dport); put16(udp + 4, 8 + n);
    udp[6] = 0xFF; udp[7] = 0xFF;
    memcpy(h + 36, buf, TN_BTH);
    h[36 + 4] = 0xFF;
    uint32_t crc = tn_crc32(0, h, sizeof h);
    return tn_crc32(crc, buf + TN_BTH, n - TN_ICRC - TN_BTH);
}

void tn_icrc_finish(uint8_t *buf, uint32_t n, uint32_t src, uint32_t dst, uint16_t sport,
                    uint16_t dport)
{
    uint32_t c = icrc_of(buf, n, src, dst, sport, dport);
    uint8_t *p = buf + n - TN_ICRC;
    p[0] = c; p[1] = c >> 8; p[2] = c >> 16; p[3] = c >> 24;
}

int tn_icrc_ok(const uint8_t *buf, uint32_t n, uint32_t src, uint32_t dst, uint16_t sport,
               uint16_t dport)
{
    if (n < TN_BTH + TN_ICRC)
        return 0;
    const uint8_t *p = buf + n - TN_ICRC;
    uint32_t got = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return got == icrc_of(buf, n, src, dst, sport, dport);
}

void tn_pack_bth(uint8_t *p, int op, uint32_t dqp, uint32_t psn, int ack_req, int becn)
{
    p[0] = (uint8_t)op; p[1] = 0; put16(p + 2, 0xFFFF);
    put32(p + 4, (becn ? 1u << 30 : 0) | (dqp & TN_PSN_MASK));
    put32(p + 8, (ack_req ? 1u << 31 : 0) | (psn & TN_PSN_MASK));
}

int tn_parse(const uint8_t *buf, uint32_t n, struct tn_pkt *p)
{
    memset(p, 0, sizeof *p);
    if (n < TN_BTH + TN_ICRC)
        return -1;
    p->op = buf[0];
    p->dqp = get32(buf + 4) & TN_PSN_MASK;
    p->psn = get32(buf + 8) & TN_PSN_MASK;
    uint32_t end = n - TN_ICRC, off = TN_BTH;
    if (op_has_reth(p->op)) {
        if (end - off < TN_RETH)
            return -1;
        p->has_reth = 1;
        p->reth_raw = buf + off;
        p->va = get64(buf + off); p->rkey = get32(buf + off + 8);
        p->dma_len = get32(buf + off + 12);
        off += TN_RETH;
    } else if (p->op == OP_ACK) {
        if (end - off < TN_AETH)
            return -1;
        uint32_t w = get32(buf + off);
        p->has_aeth = 1; p->syndrome = w >> 24; p->msn = w & TN_PSN_MASK;
        off += TN_AETH;
        if (end - off >= TN_SACK_HDR) {
            uint32_t s = get32(buf + off);
            uint32_t nb = (s >> 24) * 4;
            if (end - off - TN_SACK_HDR < nb)
                return -1;
            p->has_sack = 1; p->sack_base = s & TN_PSN_MASK;
            p->sack_bits = buf + off + TN_SACK_HDR; p->sack_len = nb;
            off += TN_SACK_HDR + nb;
        }
    } else if (p->op == OP_FEC_REPAIR) {
        if (end - off < TN_FEC_HDR)
            return -1;
        const uint8_t *f = buf + off;
        p->has_fec = 1; p->fk = f[0]; p->fm = f[1]; p->findex = f[2]; p->fstride = f[3];
        p->fslen = get16(f + 4); p->fcount = get16(f + 6);
        off += TN_FEC_HDR;
    }
    p->payload = buf + off;
    p->plen = end - off;
    return 0;
}
