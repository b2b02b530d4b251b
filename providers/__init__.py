"""kernelwright: providers."""
