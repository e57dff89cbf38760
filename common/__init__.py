"""What more than one layer of the project needs, so that no layer imports a sibling's
internals and each thing exists once.

- :mod:`common.p4runtime`: P4Runtime values and the P4Info index, used by the
  switch's server (``softswitch.p4runtime``) and the controller's client
  (``controller.p4rt``)
- :mod:`common.flow_batches`: the per-flow batch rounds of the vectorised engines
  (DCQCN's in ``traffic.cc``, HPCC's in ``controller.cc``)
- :mod:`common.loss`: the loss models (Bernoulli, Gilbert-Elliott) and their sampler,
  for topology files, specs, WAN links, the eBPF dropper, the receivers and the fits
- :mod:`common.faults`: the fault kinds the test bed injects and the diagnosis names
- :mod:`common.argtypes`: argparse ``type=`` checkers of every command line
- :mod:`common.processes`: starting and stopping a private server process
- :mod:`common.kernel`: namespaces, veth links, tc attachment and port shaping, driven
  by the host side (``ebpf``), the switch's eBPF target and the test bed
- :mod:`common.auth`: key files, the replay window and the checks of
  ``formats.auth`` frames (host agent and controller), the keyless-exposure rule, and
  the certificates of P4Runtime over mutual TLS

Protocol constants and packet formats are shared too, but they have their own
package, :mod:`formats`, one layer lower: ``common`` imports ``formats`` (``common.auth``
checks ``formats.auth`` frames) and nothing else of the project.
"""
