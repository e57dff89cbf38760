"""Developer tools of softswitch (run from a checkout, not part of a switch)."""
