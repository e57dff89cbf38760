"""controller/cc package."""
