"""kernelwright: graphs."""
