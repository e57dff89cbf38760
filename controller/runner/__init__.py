"""The running controller (`python -m controller run`) and its state file (`show`).

    ctl = Controller(cfg=RunConfig(topology="mininet_topos/topofiles/dumbbell.yaml", out_dir="out"),
                     progress=print).start()
    ...
    ctl.stop()
"""
from .app import Controller, SwitchStatus
from .config import RunConfig, default_program
from .errors import RunError
from .links import LinkPoller
from .state import STATE_FILE, VIEWS, StateError, format_view, read_state, write_state

__all__ = ["STATE_FILE", "VIEWS", "Controller", "LinkPoller", "RunConfig", "RunError", "StateError",
           "SwitchStatus", "default_program", "format_view", "read_state", "write_state"]
