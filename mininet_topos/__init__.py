"""mininet_topos package."""
