"""Topology model, file loading, validation and routing shared by controller and test bed.

Typical use::

    from controller.topology import load_topology, routes, paths
    topo = load_topology("mininet_topos/topofiles/leaf_spine.yaml")
    for route in routes(topo)["s3"]:
        ...
"""
from .errors import RoutingError, TopologyError, TopologyFormatError, TopologyValidationError
from .generators import GENERATORS, dumbbell, leaf_spine, two_datacenters
from .load import (
    LINK_DEFAULTS,
    dump_topology,
    dumps_topology,
    load_topology,
    loads_topology,
    topology_from_dict,
)
from .model import (
    DEFAULT_CPU_PORT,
    HOST_PORT,
    Endpoint,
    Host,
    Link,
    LinkRole,
    LossKind,
    LossModel,
    Switch,
    SwitchRole,
    Topology,
)
from .routing import (
    DirectedLink,
    EcmpGroup,
    Hop,
    HostConfig,
    Neighbour,
    NextHop,
    PortConfig,
    Route,
    directed_links,
    ecmp_groups,
    host_configs,
    node_names_by_id,
    path_link_indices,
    path_links,
    paths,
    port_configs,
    port_queue_pkts,
    port_rates_mbps,
    port_roles,
    routes,
    switch_distances,
    switch_neighbours,
)
from .validate import problems, validate

__all__ = [
    "DEFAULT_CPU_PORT",
    "GENERATORS",
    "HOST_PORT",
    "LINK_DEFAULTS",
    "DirectedLink",
    "EcmpGroup",
    "Endpoint",
    "Hop",
    "Host",
    "HostConfig",
    "Link",
    "LinkRole",
    "LossKind",
    "LossModel",
    "Neighbour",
    "NextHop",
    "PortConfig",
    "Route",
    "RoutingError",
    "Switch",
    "SwitchRole",
    "Topology",
    "TopologyError",
    "TopologyFormatError",
    "TopologyValidationError",
    "directed_links",
    "dumbbell",
    "dump_topology",
    "dumps_topology",
    "ecmp_groups",
    "host_configs",
    "leaf_spine",
    "load_topology",
    "loads_topology",
    "node_names_by_id",
    "path_link_indices",
    "path_links",
    "paths",
    "port_configs",
    "port_queue_pkts",
    "port_rates_mbps",
    "port_roles",
    "problems",
    "routes",
    "switch_distances",
    "switch_neighbours",
    "topology_from_dict",
    "two_datacenters",
    "validate",
]
