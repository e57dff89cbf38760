"""softswitch package."""
