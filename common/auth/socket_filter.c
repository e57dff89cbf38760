/* Socket filter of the controller's and agents' UDP sockets: forged datagrams are
 * dropped in the kernel, before they cost a wake-up, a copy and Python time, and
 * counted by reason in `drops` (index = reason, see socket_filter.py).
 *
 * For a UDP socket the program sees the skb at the UDP header (offset 0); the IPv4
 * source is read relative to the network header.
 *
 * Parameters (-D):
 *   CHECK_FRAME  1: the payload must look like a formats.auth frame of FRAME_KIND
 *                (magic, version, kind, length); 0: any payload
 *   FRAME_KIND   the frame kind this socket takes
 *   ANY_SOURCE   1: every source passes the source check; 0: only `allowed`
 */
#include <uapi/linux/bpf.h>
#include <uapi/linux/if_ether.h>

#define R_SOURCE 0
#define R_SHORT 1
#define R_UNAUTH 2
#define R_VERSION 3
#define R_KIND 4
#define N_REASONS 5

#define AUTH_MAGIC_BE 0x41544E49u   /* "INTA" as a little-endian load of the wire bytes */
#define AUTH_OVERHEAD 40

/* key: raw IPv4 source (wire order) | raw UDP source port (wire order) << 32;
 * port 0 in the key: any source port of that address */
BPF_HASH(allowed, u64, u8, 1024);
BPF_ARRAY(drops, u64, N_REASONS);

static __always_inline int drop(int reason)
{
    drops.increment(reason);
    return 0;
}

int source_filter(struct __sk_buff *skb)
{
    u8 udp[16] = {};
    u32 saddr = 0;

    if (skb->len < 8)
        return drop(R_SHORT);
    if (!ANY_SOURCE) {
        u64 key;
        if (bpf_skb_load_bytes_relative(skb, 12, &saddr, 4, BPF_HDR_START_NET) < 0)
            return drop(R_SOURCE);
        if (bpf_skb_load_bytes(skb, 0, udp, 8) < 0)
            return drop(R_SHORT);
        key = (u64)saddr | ((u64)(*(u16 *)udp) << 32);
        if (!allowed.lookup(&key)) {
            key = (u64)saddr;
            if (!allowed.lookup(&key))
                return drop(R_SOURCE);
        }
    }
    if (CHECK_FRAME) {
        if (skb->len < 8 + AUTH_OVERHEAD) {
            if (skb->len >= 12 && bpf_skb_load_bytes(skb, 0, udp, 12) == 0
                && *(u32 *)(udp + 8) != AUTH_MAGIC_BE)
                return drop(R_UNAUTH);
            return drop(R_SHORT);
        }
        if (bpf_skb_load_bytes(skb, 0, udp, 16) < 0)
            return drop(R_SHORT);
        if (*(u32 *)(udp + 8) != AUTH_MAGIC_BE)
            return drop(R_UNAUTH);
        if (udp[12] != 1)
            return drop(R_VERSION);
        if (udp[13] != FRAME_KIND)
            return drop(R_KIND);
    }
    return skb->len;
}
