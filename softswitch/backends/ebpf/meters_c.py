"""Meters on the eBPF target: ``meter(...)`` arrays and tables' ``direct_meter``s.

The Python target's meters (`softswitch.externs.stateful.meter_execute`: RFC 2698
two-rate three-colour marking, colour-blind, as BMv2) in C, one ``struct p4_meter``
per cell in a BPF array, updated under the cell's ``bpf_spin_lock``:

* rates are units per second (packets or bytes, as the meter's type says) and the
  token counts are kept in micro-units (tokens x 10^6), so a refill of ``dt`` µs at
  ``rate`` units/s adds exactly ``dt * rate`` micro-units: integer arithmetic that
  equals the Python target's ``min(burst, tokens + dt/1e6 * rate)``, without floats
  (the kernel has none);
* a cell that was never configured marks GREEN (0); a configuration write resets the
  buckets, and the first packet after it finds them full, as on the Python target;
* time is the program's clock in µs (``bpf_ktime_get_ns() / 1000``, or a test run's
  pinned ``p4_config.test_now_ns``), the Python target's ``clock_us``: only differences
  between packets matter.

A direct meter's cells live with its table (``tbl_X_mtr``, one per entry slot, as the
direct counters); the table executes the hit entry's cell before its action, and
``read(out)`` gives the colour of the last hit, kept in a one-cell array (the Python
target keeps it on the meter object, so a miss reads the previous hit's colour too).

Nothing of this is generated for a program without meters.
"""
from __future__ import annotations

import ctypes
from typing import Any

from softswitch.externs.stateful import MeterConfig

MICRO = 1_000_000
U64_MAX = (1 << 64) - 1

C_TYPES = """\
struct p4_meter {
    struct bpf_spin_lock lock;
    u32 configured;     /* 0: marks GREEN */
    u32 started;        /* the buckets were filled (by the first packet after a write) */
    u64 cir, pir;       /* units per second */
    u64 cburst, pburst; /* micro-units (burst x 10^6) */
    u64 tc, tp;         /* tokens, micro-units */
    u64 last_us;
};
"""

C_FUNCTIONS = """\
/* min(cap, t + dt * rate) without overflow (meters_c.py) */
static __always_inline u64 p4_meter_fill(u64 t, u64 cap, u64 rate, u64 dt) {
    if (t >= cap) return cap;
    u64 room = cap - t;
    if (!rate || !dt) return t;
    if (dt > room / rate) return cap;
    return t + dt * rate;
}

/* the program's clock in µs (a test run's pinned clock, else the kernel's) */
static __always_inline u64 p4_meter_now_us(void) {
    u32 z = 0;
    struct p4_config *cfg = p4_cfg.lookup(&z);
    u64 ns = cfg && cfg->test_now_ns ? cfg->test_now_ns : bpf_ktime_get_ns();
    return ns / 1000;
}

/* RFC 2698 colour-blind: 0 GREEN, 1 YELLOW, 2 RED; `amount` in units */
static __always_inline u32 p4_meter_execute(struct p4_meter *m, u64 amount) {
    if (!m) return 0;
    u64 now = p4_meter_now_us();
    u64 need = amount * 1000000ULL;
    u32 color = 0;
    bpf_spin_lock(&m->lock);
    if (m->configured) {
        if (!m->started) {
            m->tc = m->cburst;
            m->tp = m->pburst;
            m->started = 1;
        } else {
            u64 dt = now > m->last_us ? now - m->last_us : 0;
            m->tc = p4_meter_fill(m->tc, m->cburst, m->cir, dt);
            m->tp = p4_meter_fill(m->tp, m->pburst, m->pir, dt);
        }
        m->last_us = now;
        if (m->tp < need) {
            color = 2;
        } else if (m->tc < need) {
            m->tp -= need;
            color = 1;
        } else {
            m->tp -= need;
            m->tc -= need;
        }
    }
    bpf_spin_unlock(&m->lock);
    return color;
}
"""


def amount_c(meter_type: str) -> str:
    """The units one packet takes from the buckets: its length, or one packet."""
    return "(u64)P->pkt_len" if meter_type == "bytes" else "1"


def execute_c(cell: str, meter_type: str) -> str:
    """C expression: the colour of this packet at the meter cell pointer `cell`."""
    return f"p4_meter_execute({cell}, {amount_c(meter_type)})"


def write_cell(tab: Any, index: int, config: MeterConfig | None) -> None:
    """Configure cell `index` of a meter map (None: unconfigured, GREEN); the buckets
    start again, as `Meter.set_config` resets the Python target's state."""
    cell = tab.Leaf()   # zeroed; the kernel keeps the lock word of the map's value
    if config is not None:
        cell.configured = 1
        cell.cir, cell.pir = config.cir, config.pir
        cell.cburst = min(config.cburst * MICRO, U64_MAX)
        cell.pburst = min(config.pburst * MICRO, U64_MAX)
    tab[ctypes.c_int(index)] = cell


def meter_type_of(arg: Any) -> str:
    """``MeterType.packets`` / ``MeterType.bytes`` of a constructor argument ('' if not)."""
    value = getattr(arg, "value", arg)
    return str(getattr(value, "member", "") or "")
