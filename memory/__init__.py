"""kernelwright: memory."""
