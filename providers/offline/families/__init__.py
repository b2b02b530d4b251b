"""Whole-task writers: families of programs written apart from the generic pipeline, asked first.

conv/ writes Triton convolutions with the following work fused; pool_writer.py writes standalone
pooling. Each is a function named in plugins.TASK_WRITERS.
"""
