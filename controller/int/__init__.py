"""controller/int package."""
