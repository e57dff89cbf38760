"""The kernel hook a generated program runs at: tc (the default) or XDP.

Why one switch point: the pipeline's C (parser, controls, tables, deparser, traffic
manager) is the same on both hooks; only how it touches the packet differs. So the
generated code reaches the packet through a small set of primitives, defined here per
hook and chosen at generation time:

========================  ===============================  ==============================
primitive                 tc (``struct __sk_buff``)        XDP (``struct xdp_md``)
========================  ===============================  ==============================
``pk_load``/``pk_store``  ``bpf_skb_load/store_bytes``     ``bpf_xdp_load/store_bytes``
``pk_len``                ``skb->len``                     ``bpf_xdp_get_buff_len``
``pk_set_len``            ``bpf_skb_change_tail``          ``bpf_xdp_adjust_tail``
``resize_headers``        ``bpf_skb_adjust_room``, head    ``bpf_xdp_adjust_head``
                          growth, payload moves
``pk_ingress_ifindex``    ``skb->ingress_ifindex``         ``ctx->ingress_ifindex``
``pk_mark``               ``skb->mark``                    0 (XDP has no mark)
verdicts                  ``TC_ACT_OK/SHOT/REDIRECT``      ``XDP_PASS/DROP/REDIRECT``
========================  ===============================  ==============================

What XDP cannot do is refused before anything is generated (`refuse_for_xdp`): it has
no socket buffer, so no ``bpf_clone_redirect`` and no ``mark`` to tag a copy with
(the target's clones, multicast replicas, resubmit and recirculate are such copies,
`clones.py`); and ``XDP_REDIRECT`` hands the frame to the egress device's driver past
its qdisc, so the kernel cannot shape a port at the traffic manager's rate
(`queues.py`): a queue rate on this hook is refused where it is set.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.frontend import ast as A

HOOKS = ("tc", "xdp")
DEFAULT_HOOK = "tc"


@dataclass(frozen=True, slots=True)
class Hook:
    """One hook's entry type, verdicts and packet-access primitives (C text)."""

    name: str
    ctx: str              # the entry's context type
    include: str          # the uapi header of its verdicts
    pass_: str            # leave the frame to the kernel's stack
    drop: str
    redirect: str         # what a test run returns for a forwarded frame
    primitives: str       # pk_* (before the pipeline's functions)
    resize: str           # resize_headers(ctx, P, len) (after the parser)
    clones: bool          # copies of the frame (clones, multicast, resubmit, recirculate)
    shaping: bool         # the kernel's qdisc sees what the program forwards


_TC_PRIMITIVES = """\
/* macros, not inline functions: the verifier follows the INT program's parser only
   when the context's fields are read in place (an inline pk_len broke it) */
#define pk_len(ctx) ((ctx)->len)
#define pk_ingress_ifindex(ctx) ((ctx)->ingress_ifindex)
#define pk_mark(ctx) ((ctx)->mark)
#define pk_load(ctx, off, to, n) bpf_skb_load_bytes(ctx, off, to, n)
#define pk_store(ctx, off, from, n) bpf_skb_store_bytes(ctx, off, from, n, 0)
/* the frame's length becomes n (its tail is cut or grown) */
#define pk_set_len(ctx, n) bpf_skb_change_tail(ctx, n, 0)

"""

_TC_RESIZE = """\
/* Give the packet `len` header bytes where the parser consumed P->off. */
static __always_inline int resize_headers(P4_CTX *ctx, struct pipe *P, u32 len) {{
    if (P->truncate && P->truncate >= len) {{
        /* truncate(): cut the payload before the headers move (moving them at the MAC
           header raises the kernel's minimum length); a failure leaves the final cut */
        u64 keep = (u64)P->off + (P->truncate - len);
        if (keep < ctx->len) bpf_skb_change_tail(ctx, (u32)keep, 0);
    }}
    s32 delta = (s32)len - (s32)P->off;
    if (delta == 0) return 0;
    if (bpf_skb_adjust_room(ctx, delta, BPF_ADJ_ROOM_MAC, 0) == 0) return 0;
    if (delta > 0) return bpf_skb_change_head(ctx, (u32)delta, 0);
    /* constant sizes only (the verifier bounds them): 64-byte chunks, then single bytes */
    u32 from = P->off, to = len, total = ctx->len;
    u32 n = total > from ? total - from : 0;
    u32 full = n / 64;
#pragma clang loop unroll(disable)
    for (u32 i = 0; i < {chunks}; i++) {{
        if (i >= full) break;
        if (bpf_skb_load_bytes(ctx, from + i * 64, P->mv, 64) < 0) return -1;
        if (bpf_skb_store_bytes(ctx, to + i * 64, P->mv, 64, 0) < 0) return -1;
    }}
    u32 base = full * 64;
#pragma clang loop unroll(disable)
    for (u32 j = 0; j < 64; j++) {{
        if (base + j >= n) break;
        if (bpf_skb_load_bytes(ctx, from + base + j, P->mv, 1) < 0) return -1;
        if (bpf_skb_store_bytes(ctx, to + base + j, P->mv, 1, 0) < 0) return -1;
    }}
    return bpf_skb_change_tail(ctx, total - (from - to), 0);
}}
"""

_XDP_PRIMITIVES = """\
#define pk_len(ctx) ((u32)bpf_xdp_get_buff_len(ctx))
#define pk_ingress_ifindex(ctx) ((ctx)->ingress_ifindex)
#define pk_mark(ctx) 0
#define pk_load(ctx, off, to, n) bpf_xdp_load_bytes(ctx, off, to, n)
#define pk_store(ctx, off, from, n) bpf_xdp_store_bytes(ctx, off, from, n)
/* the frame's length becomes n (its tail is cut or grown) */
static __always_inline int pk_set_len(P4_CTX *ctx, u32 n) {
    return bpf_xdp_adjust_tail(ctx, (int)n - (int)pk_len(ctx));
}

"""

_XDP_RESIZE = """\
/* Give the packet `len` header bytes where the parser consumed P->off: the headers are
   rewritten from offset 0, so the frame's start moves and the payload stays. */
static __always_inline int resize_headers(P4_CTX *ctx, struct pipe *P, u32 len) {{
    if (P->truncate && P->truncate >= len) {{
        /* truncate(): cut the payload first; a failure leaves the final cut */
        u64 keep = (u64)P->off + (P->truncate - len);
        if (keep < pk_len(ctx)) pk_set_len(ctx, (u32)keep);
    }}
    s32 delta = (s32)P->off - (s32)len;
    if (delta == 0) return 0;
    return bpf_xdp_adjust_head(ctx, delta);
}}
"""

TC = Hook(name="tc", ctx="struct __sk_buff", include="uapi/linux/pkt_cls.h",
          pass_="TC_ACT_OK", drop="TC_ACT_SHOT", redirect="TC_ACT_REDIRECT",
          primitives=_TC_PRIMITIVES, resize=_TC_RESIZE, clones=True, shaping=True)
XDP = Hook(name="xdp", ctx="struct xdp_md", include="uapi/linux/bpf.h",
           pass_="XDP_PASS", drop="XDP_DROP", redirect="XDP_REDIRECT",
           primitives=_XDP_PRIMITIVES, resize=_XDP_RESIZE, clones=False, shaping=False)
_BY_NAME = {h.name: h for h in (TC, XDP)}

# the verdict numbers a test run returns (linux/pkt_cls.h, linux/bpf.h)
TEST_REDIRECT = {"tc": 7, "xdp": 4}


def hook_named(name: str) -> Hook:
    hook = _BY_NAME.get(name)
    if hook is None:
        raise EbpfUnsupported(None, f"hook {name!r} (have: {', '.join(HOOKS)})")
    return hook


def defines(hook: Hook) -> str:
    """The macros the shared pipeline is written against."""
    return (f"#include <{hook.include}>\n"
            f"#define P4_CTX {hook.ctx}\n#define P4_HOOK_{hook.name.upper()} 1\n"
            f"#define P4_CLONES {int(hook.clones)}\n"
            f"#define P4_PASS {hook.pass_}\n#define P4_DROP {hook.drop}\n"
            f"#define P4_REDIRECT {hook.redirect}\n")


# ----------------------------------------------------------------- refusals
_COPIES = {"clone": "clones (a copy of the frame needs bpf_clone_redirect of a socket buffer)",
           "resubmit": "resubmit (a second pass needs a copy of the frame: bpf_clone_redirect)",
           "recirculate": "recirculate (a second pass needs a copy of the frame: bpf_clone_redirect)"}


def refuse_for_xdp(checked: Any, arch: Any) -> None:
    """Raise `EbpfUnsupported` at the first construct the XDP hook cannot run: a clone,
    resubmit or recirculate call, or a write of ``standard_metadata.mcast_grp``
    (multicast replicas are copies too)."""
    from softswitch.backends.ebpf.layout import strip
    from softswitch.frontend import types as T
    from softswitch.frontend.walk import walk
    for node in walk(checked.program):
        if isinstance(node, A.MethodCallExpression) and node.call_kind is A.CallKind.EXTERN_FUNCTION:
            name = getattr(node.callee_decl, "name", None) or ""
            sem = arch.semantics(name)
            request = getattr(sem, "request", None)
            if request in _COPIES:
                raise EbpfUnsupported(node, f"{name}: {_COPIES[request]} with --hook xdp "
                                            "(use --hook tc)")
        elif isinstance(node, A.AssignmentStatement):
            lhs = node.lhs
            while isinstance(lhs, A.SliceExpression):
                lhs = lhs.expr
            if isinstance(lhs, A.MemberExpression) and lhs.member == "mcast_grp":
                t = strip(getattr(lhs.expr, "type", None))
                if isinstance(t, T.StructType) and t.name == "standard_metadata_t":
                    raise EbpfUnsupported(node, "multicast (standard_metadata.mcast_grp: replicas "
                                                "are copies of the frame, which need "
                                                "bpf_clone_redirect) with --hook xdp (use --hook tc)")


def refuse_rate(hook: Hook, port: int, rate_bps: float | None) -> None:
    """A queue rate on a hook whose frames skip the qdisc: refused, never unshaped."""
    if rate_bps and not hook.shaping:
        raise EbpfUnsupported(None, f"a queue rate on port {port} ({rate_bps / 1e6:g} Mbit/s) with "
                                    "--hook xdp: XDP_REDIRECT bypasses the egress qdisc, so the "
                                    "kernel cannot shape the port (use --hook tc)")
