"""ebpf package."""
