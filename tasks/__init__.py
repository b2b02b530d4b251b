"""kernelwright: tasks."""
