"""What the writer decides: which kernels a task is cut into, and each kernel's design and config.

schedule.py cuts the IR into kernels (matmul_fusion.py merges two products that share their left
operand); designs.py is the design space of every kind; policy.py reads the prompt (step, parent, rules,
experience, target) and chooses; variants.py writes a task's programs at chosen designs and configs, for
sweeps and tests.
"""
