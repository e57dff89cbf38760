"""The policy's candidates for one message, as a table (``python -m traffic plans``).

Why a command: mode auto's summary says which plan each message took and why, but a
user asking "could any scheme have done better here?" needs every candidate's
predicted mean and p99 completion time next to selective repeat's, and the count of
plans that meet a target at all (traffic/recovery.py, :func:`predictions`).
"""
from __future__ import annotations

from traffic.recovery import PathView, PlanPrediction

__all__ = ["format_predictions"]


def format_predictions(preds: list[PlanPrediction], path: PathView, n_pkts: int, *,
                       mtu: int, cap: float, top: int = 10,
                       p99_target: float = 0.8) -> str:
    """The ``top`` cheapest plans (and SR and the chosen one wherever they rank), each
    with its repairs, P(retx), mean and p99 FCT as the policy predicts them and as a
    multiple of SR's, and a closing line counting the plans whose p99 is at most
    ``p99_target`` x SR's at a mean FCT no higher than SR's."""
    sr = next(p for p in preds if p.plan.scheme == "sr")
    lm = path.loss
    grid_rtt = path.quantised().rtt_s
    on_grid = (f" (decided at {grid_rtt * 1e3:.3g} ms, the policy's 25 % grid)"
               if abs(grid_rtt - path.rtt_s) > 1e-9 else "")
    head = (f"path: {lm.mean_loss:.2%} loss, mean burst {lm.mean_burst_len:.1f} packets "
            f"({lm.kind}), rtt {path.rtt_s * 1e3:.3g} ms{on_grid}, "
            f"{path.rate_bps / 1e6:g} Mbit/s"
            f"{', window-bound' if path.window_bound else ''}; {n_pkts} packets of {mtu} B; "
            f"repair cap {cap:.1%} of the data")
    cols = (f"   {'plan':<16} {'repairs':>13} {'P(retx)':>8} {'mean FCT ms':>12} {'x SR':>5} "
            f"{'p99 FCT ms':>11} {'x SR':>5} {'cost ms':>8}")
    lines = [head, cols]
    shown = [p for i, p in enumerate(preds) if i < top or p is sr or p.chosen]
    for p in shown:
        r = p.plan.repair_pkts
        lines.append(f" {'*' if p.chosen else ' '} {p.plan.label:<16} "
                     f"{r:>5} ({r / n_pkts:6.1%}) {p.plan.p_retx:8.4f} "
                     f"{p.mean_fct_s * 1e3:12.1f} {p.mean_fct_s / sr.mean_fct_s:5.2f} "
                     f"{p.p99_fct_s * 1e3:11.1f} {p.p99_fct_s / sr.p99_fct_s:5.2f} "
                     f"{p.cost_s * 1e3:8.1f}")
    if len(shown) < len(preds):
        lines.append(f"   ... {len(preds) - len(shown)} more (--top)")
    both = sum(p.p99_fct_s <= p99_target * sr.p99_fct_s and p.mean_fct_s <= sr.mean_fct_s
               for p in preds)
    lines.append(f"* the policy's choice.  Plans with a p99 FCT <= {p99_target:g} x SR's at "
                 f"a mean FCT no higher than SR's: {both} of {len(preds)}")
    return "\n".join(lines)
