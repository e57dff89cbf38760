"""The run-time objects of a program, built once from its lowered form for every target.

    from softswitch.objects import build_objects
    objects = build_objects(lowered)          # tables, registers, counters, meters, digests ...
    objects.tables["MyIngress.ipv4_lpm"].keys, objects.p4info()
    program_objects(checked)                  # lowered for v1model, then built

Why one builder: what the control plane sees of a program (each table with its keys,
actions, default action and const entries; registers, counters, meters, direct
resources, action profiles, digests, value sets; the P4Info that names them) is a
function of the lowered program and its architecture, not of how a target runs it.
The Python back end binds its generated code to these objects and the eBPF target
mirrors them into its maps; neither builds them through the other. This is
behavioral-model's split: bm_sim's ``P4Objects`` makes a program's tables, registers,
counters and meters once from its target-independent description, and a target
(simple_switch) runs its pipeline over them.

Modules: `model` (`RuntimeObjects`), `build` (`build_objects`), `makers` (where an
architecture's extern instances get their objects: `instance_maker`), `v1model`
(v1model's instance makers).
"""
from softswitch.objects.build import build_objects, program_objects
from softswitch.objects.makers import instance_maker
from softswitch.objects.model import RuntimeObjects

__all__ = ["RuntimeObjects", "build_objects", "instance_maker", "program_objects"]
