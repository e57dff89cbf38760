"""Experiments on the Mininet test bed: specs, runner, results folders and plots.

* :func:`load_spec` / :func:`expand` / :func:`spec_from_dict` -- checked
  :class:`ExperimentSpec` objects from YAML (sweeps expand to one spec per variant);
* :func:`run_experiment` / :func:`run_specs` -- run them (root, Mininet) and write a
  results folder (``summary.json``, CSV series, PNG plots);
* :class:`Testbed` -- the running network with its switches and node processes;
* :func:`analyse` -- results from the raw files of a run (no root needed);
* :func:`preset_path` / :data:`PRESETS` -- the shipped specs (demo, incast_cc, wan_loss).
"""
from mininet_topos.testbed import Testbed

from .analysis import Analysis, LinkResult, analyse
from .errors import ExperimentError, RunError, SpecError
from .presets import PRESETS, preset_path
from .results import ResultsDir, read_csv
from .runner import RunResult, run_experiment, run_specs, sigterm_as_interrupt
from .spec import (
    CC_MODES,
    RECOVERY_MODES,
    SWITCH_KINDS,
    WORKLOADS,
    ExperimentSpec,
    LinkOverride,
    Workload,
    apply_overrides,
    expand,
    load_spec,
    spec_from_dict,
)

__all__ = [
    "CC_MODES", "PRESETS", "RECOVERY_MODES", "SWITCH_KINDS", "WORKLOADS", "Analysis",
    "ExperimentError", "ExperimentSpec", "LinkOverride", "LinkResult", "ResultsDir",
    "RunError", "RunResult", "SpecError", "Testbed", "Workload", "analyse", "apply_overrides",
    "expand", "load_spec", "preset_path", "read_csv", "run_experiment", "run_specs",
    "sigterm_as_interrupt", "spec_from_dict",
]
