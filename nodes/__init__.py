"""kernelwright: nodes."""
