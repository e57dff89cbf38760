"""The eBPF target's traffic manager: a virtual queue per egress port, in a BPF map.

Why virtual: a tc program cannot read a qdisc's backlog, yet INT needs the queue depth,
the time a packet waited and its departure time. So the program keeps, per port, the
state of a FIFO drained at the port's rate (``struct p4_queue``: time the link is busy
until, packets in it, rate, depth, counters) and, between ingress and egress, does for
each packet what the Python target's traffic manager (`softswitch.switchd.tm`) does:

* the queue is drained by the time elapsed since the last packet x the rate (the
  packets still in it are the queued work's share, ``ceil(pkts * left / was)``, exact
  for packets of one size, the average size otherwise);
* ``enq_qdepth`` is the number of packets waiting when it arrives (the one being sent is
  not waiting, as the Python target pops a head when it starts to leave); when that is
  the depth or more, the packet is tail-dropped and counted;
* otherwise it starts to leave when the link is free: ``deq_timedelta`` is that wait
  (µs), ``enq_timestamp`` the arrival (µs, 32 bits) and ``egress_global_timestamp`` the
  departure (µs, 48 bits), all on the program's clock (``bpf_ktime_get_ns``); the wait x
  the rate is the bytes queued ahead of it (``busy_until - now``), which is how a P4
  program learns the queue in bytes here (p4/README.md, "Queue bytes");
* ``deq_qdepth`` (the packets behind it when it leaves) depends on arrivals the program
  has not seen yet: the target gives the depth it found (equal in a steady queue, where
  as many arrive behind a packet as left before it; low while a burst builds up).

A port with rate 0 is unpaced, as on the Python target: no queue, every field 0.

The kernel then sends the packets at the same rate (`targets/ebpf/shaping.py`: HTB with a FIFO on
the port, the test bed's shaping), so what the program computes is when they really
leave. The FIFO holds more than the virtual depth, so the kernel drops nothing the
model admitted; the drops are the model's, counted per port.

The queue is charged the packet's length when it is queued, and corrected
(``tm_settle``) to the frame that really leaves once egress and the deparser have run:
the kernel's shaper serialises that frame, so a program that adds an INT hop would
otherwise see its port drain slower than the model says, and the kernel's FIFO, not the
model, would drop.  A packet egress drops gives its time back.

Test runs use an injected clock (``p4_config.test_now_ns``; 0 = the kernel's clock).
"""
from __future__ import annotations

import ctypes
from typing import Any

DEFAULT_DEPTH_PKTS = 64        # the Python target's default (BMv2's)
KERNEL_FIFO_FACTOR = 4         # the shaping FIFO holds this many times the virtual depth

C_DECLS = """\
struct p4_queue {
    struct bpf_spin_lock lock;
    u32 depth;          /* packets that may wait */
    u64 rate_bps;       /* 0 = unpaced */
    u64 busy_until_ns;  /* the link is sending what it has until then */
    u64 last_ns;        /* time of the last update */
    u64 pkts;           /* packets sending or waiting at last_ns */
    u64 enqueued;
    u64 tail_drops;
    u64 high_water;
};
"""

C_MAP = "BPF_ARRAY(p4_queues, struct p4_queue, {ports});"

C_FUNCTION = """\
/* The traffic manager (softswitch/backends/ebpf/queues.py): 0 = queued, -1 = tail drop. */
static __always_inline int tm_enqueue(struct p4_config *cfg, struct pipe *P) {
    u64 now = cfg->test_now_ns ? cfg->test_now_ns : bpf_ktime_get_ns();
    u32 port = P->sm.egress_port;
    u64 wait_ns = 0, waiting = 0;
    P->tm_len = 0;
    struct p4_queue *q = p4_queues.lookup(&port);
    if (q && q->rate_bps) {
        bpf_spin_lock(&q->lock);
        u64 rate = q->rate_bps;
        u64 left = q->busy_until_ns > now ? q->busy_until_ns - now : 0;
        u64 was = q->busy_until_ns > q->last_ns ? q->busy_until_ns - q->last_ns : 0;
        u64 pkts = 0;
        if (left && was && q->pkts) {
            if (left > was) left = was;
            pkts = (q->pkts * left + was - 1) / was;
        }
        waiting = pkts ? pkts - 1 : 0;
        if (waiting >= q->depth) {
            q->tail_drops += 1;
            q->pkts = pkts;
            q->last_ns = now;
            bpf_spin_unlock(&q->lock);
            return -1;
        }
        wait_ns = left;
        u64 start = now + left;
        q->busy_until_ns = start + (u64)P->sm.packet_length * 8000000000ULL / rate;
        P->tm_len = P->sm.packet_length;   /* charged now; tm_settle corrects it */
        P->tm_port = port;
        q->pkts = pkts + 1;
        q->last_ns = now;
        q->enqueued += 1;
        if (waiting + 1 > q->high_water) q->high_water = waiting + 1;
        bpf_spin_unlock(&q->lock);
    }
    P->sm.enq_timestamp = (now / 1000) & 0xffffffffULL;
    P->sm.enq_qdepth = waiting & 0x7ffff;
    P->sm.deq_qdepth = waiting & 0x7ffff;
    P->sm.deq_timedelta = (wait_ns / 1000) & 0xffffffffULL;
    P->sm.egress_global_timestamp = ((now + wait_ns) / 1000) & 0xffffffffffffULL;
    return 0;
}

/* What the port really sends: egress and the deparser may add bytes (an INT hop, a
   link header) or drop the packet (sent = 0), and the kernel's shaper serialises the
   frame that leaves, so the queue's busy time is corrected to `sent` bytes. */
static __always_inline void tm_settle(struct pipe *P, u32 sent) {
    u32 charged = P->tm_len;
    if (!charged || sent == charged) return;
    P->tm_len = 0;
    u32 port = P->tm_port;
    struct p4_queue *q = p4_queues.lookup(&port);
    if (!q) return;
    bpf_spin_lock(&q->lock);
    u64 rate = q->rate_bps;
    if (rate) {
        if (sent > charged) {
            q->busy_until_ns += (u64)(sent - charged) * 8000000000ULL / rate;
        } else {
            u64 back = (u64)(charged - sent) * 8000000000ULL / rate;
            q->busy_until_ns = q->busy_until_ns > back ? q->busy_until_ns - back : 0;
        }
    }
    bpf_spin_unlock(&q->lock);
}
"""


def set_queue(kernel: Any, port: int, *, rate_bps: float | None = None,
              depth_pkts: int | None = None) -> None:
    """Change the rate (bit/s, 0 = unpaced) and/or depth of `port`'s virtual queue; the
    packets in it keep their departure times (a new rate applies to the next one)."""
    tab = kernel.table("p4_queues")
    key = ctypes.c_int(port)
    leaf = tab[key]
    if leaf.depth == 0:
        leaf.depth = DEFAULT_DEPTH_PKTS
    if rate_bps is not None:
        leaf.rate_bps = int(rate_bps)
    if depth_pkts is not None:
        leaf.depth = int(depth_pkts)
    tab[key] = leaf


def queue_stats(kernel: Any, ports: list[int]) -> dict[int, dict[str, float]]:
    """Per port, as the Python target's `TrafficManager.queue_stats` names them."""
    tab = kernel.table("p4_queues")
    out: dict[int, dict[str, float]] = {}
    for port in ports:
        q = tab[ctypes.c_int(port)]
        out[port] = {"queue_high_water": int(q.high_water), "tail_drops": int(q.tail_drops),
                     "enqueued": int(q.enqueued), "queue_rate_bps": float(q.rate_bps),
                     "queue_size_pkts": int(q.depth) or DEFAULT_DEPTH_PKTS}
    return out
