"""P4Runtime shared by the switch's server (``softswitch.p4runtime``) and the
controller's client (``controller.p4rt``): the binary encoding of values
(:mod:`.values`) and the P4Info read into typed objects indexed by id and name
(:mod:`.p4info`).

Why here: both ends read the same P4Info and put the same bytes on the wire; written
once, they cannot disagree.  Errors are plain ``ValueError``/``LookupError``
subclasses; each end turns them into its own (a gRPC status in the server, a
``P4rtError`` in the client).
"""
