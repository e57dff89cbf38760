"""The live view: one page in the browser showing the topology, links, flows, the loss
map, the diagnosis and the alerts, served by the controller itself.

Why in the controller: the state the page shows is the controller's snapshot (the same
dict ``controller show`` reads from the state file), so a live run and a finished run's
results folder are served by the same code; the page's only library (plotly.js) ships
inside the ``plotly`` Python package and is served from here, so the page works
offline.
"""
from __future__ import annotations

from .server import WebError, WebServer, parse_web_address
from .view import build_view

__all__ = ["WebError", "WebServer", "build_view", "parse_web_address"]
