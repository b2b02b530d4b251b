"""kernelwright: providers/offline."""
