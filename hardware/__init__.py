"""kernelwright: hardware."""
