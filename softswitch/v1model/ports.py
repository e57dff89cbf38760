"""v1model's port numbering as BMv2's simple_switch has it: the one owner of these numbers.

``standard_metadata`` ports are 9 bits wide and the highest one, 511, means "drop"
(``mark_to_drop`` writes it; `V1Switch` drops a packet sent there), so data and CPU
ports are 0..510. `V1Model.drop_port` starts from `DROP_PORT` (a variant may pick
another); code that runs a program reads its architecture's ``drop_port``, while
code with no program at hand (command lines, the controller's topology checks,
the test bed's switch classes) reads `DROP_PORT` here. This module imports
nothing, so reading it does not load the compiler.
"""
from __future__ import annotations

PORT_BITS = 9                       # width of every port field of standard_metadata
MAX_PORT = (1 << PORT_BITS) - 1     # the highest port number a port field holds
DROP_PORT = MAX_PORT                # 511: simple_switch's drop port, never a data or CPU port
DEFAULT_CPU_PORT = DROP_PORT - 1    # 510: the project's CPU port unless told (BMv2 has no default)
