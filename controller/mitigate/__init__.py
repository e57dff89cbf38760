"""From diagnosis to recovery: the controller acts on the faults it names.

`findings` turns the diagnosis' culprits and the link sequence counters (gray loss,
dead links) into findings,
`policy` decides (reroute, drain, FEC, move a rank, nothing; each behind a guard),
`job` knows the ranks and spare hosts (rank moves),
`fabric` answers the topology questions (which link, is there another way), and
`mitigator` writes the decisions to the switches over P4Runtime or only reports them.
See README.md.
"""
from .fabric import Fabric
from .findings import (
    Finding,
    GrayLossRule,
    SilenceRule,
    findings_from_diagnosis,
    findings_from_link_loss,
    findings_from_silence,
    loss_lower_bound,
)
from .job import Job, JobError
from .mitigator import MitigationMode, Mitigator
from .policy import VERBS, Action, Guard, Policy

__all__ = ["VERBS", "Action", "Fabric", "Finding", "GrayLossRule", "Guard", "Job", "JobError", "MitigationMode",
           "Mitigator",
           "Policy", "SilenceRule", "findings_from_diagnosis", "findings_from_link_loss", "findings_from_silence",
           "loss_lower_bound"]
