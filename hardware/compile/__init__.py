"""Offline compile feedback: a candidate's Triton kernels compiled for a GPU target without a GPU.

feedback.py is the entry (`compile_for_target`), server.py a warm parent that forks each phase, child.py
what runs in each confined phase.
"""
