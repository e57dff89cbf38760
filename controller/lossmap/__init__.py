"""Loss maps: where packets are lost, how bursty, and how much FEC a path needs.

Pure numpy math plus matplotlib figures, no network I/O:

* ``link_loss_map`` -- exact links x time-bin losses from link sequence counters
  (``LinkCounters``) and loss events (``LossEvents``);
* ``flow_loss_map`` / ``psn_gaps`` -- per-flow losses from RoCEv2 PSN gaps;
* ``localize`` -- flow losses voted onto links that have no counters;
* ``cycles_from_events`` / ``cycles_from_sequence``, ``run_histogram``,
  ``fit_gilbert_elliott`` -- burst statistics and a Gilbert-Elliott fit with
  bootstrap confidence intervals;
* ``choose_fec`` -- (k, m) per path meeting a target residual loss;
  ``fit_link_models`` + ``path_fec`` -- the same for every flow from a loss map;
* ``LinkLossStream`` / ``FlowLossStream`` -- the same maps kept up to date as
  polls, digests and host-record batches arrive (sliding window of bins);
  ``FlowLossListener`` feeds the flow stream from the INT collector;
* ``link_table`` / ``fec_table`` -- terminal tables (e.g. ``show losses``);
* ``plot_heatmap`` / ``plot_bursts`` -- PNG figures.
"""
from controller.lossmap.bins import LinkIndex, TimeBins
from controller.lossmap.burst import (
    Cycles,
    GilbertElliottFit,
    Interval,
    cycles_from_events,
    cycles_from_psn_gaps,
    cycles_from_sequence,
    fit_gilbert_elliott,
    run_histogram,
    simulate_gilbert_elliott,
)
from controller.lossmap.errors import LinkKeyError, LossInputError, LossMapError, LossParameterError
from controller.lossmap.fec import (
    FecPolicy,
    LinkModel,
    block_loss_pmf,
    block_loss_pmfs,
    choose_fec,
    residual_loss,
    simulate_block_residual,
)
from controller.lossmap.links import (
    LinkCounters,
    LinkLossMap,
    LossEvents,
    Source,
    link_loss_map,
    wilson_interval,
)
from controller.lossmap.listener import FlowLossListener
from controller.lossmap.localize import Localized, incidence, localize
from controller.lossmap.plots import plot_bursts, plot_heatmap
from controller.lossmap.policy import PathFec, fit_link_models, path_fec
from controller.lossmap.psn import FlowLossMap, PsnGaps, flow_loss_map, psn_gaps
from controller.lossmap.report import fec_table, link_table
from controller.lossmap.stream import BinRing, FlowLossStream, LinkLossStream

__all__ = [
    "BinRing", "Cycles", "FecPolicy", "FlowLossListener", "FlowLossMap", "FlowLossStream",
    "GilbertElliottFit", "Interval", "LinkCounters", "LinkIndex", "LinkKeyError", "LinkLossMap",
    "LinkLossStream", "LinkModel", "Localized", "LossEvents", "LossInputError", "LossMapError",
    "LossParameterError", "PathFec", "PsnGaps", "Source", "TimeBins", "block_loss_pmf",
    "block_loss_pmfs", "choose_fec", "cycles_from_events", "cycles_from_psn_gaps",
    "cycles_from_sequence", "fec_table", "fit_gilbert_elliott", "fit_link_models",
    "flow_loss_map", "incidence", "link_loss_map", "link_table", "localize", "path_fec",
    "plot_bursts", "plot_heatmap", "psn_gaps", "residual_loss", "run_histogram",
    "simulate_block_residual", "simulate_gilbert_elliott", "wilson_interval",
]
