"""The kinds of kernel the writer schedules (rows, matmul, pointwise) and the plans they are written from.

kind.py is the interface a kind provides (designs, facts, cost, defaults, config space, generator);
kind_rows.py, kind_matmul.py and kind_pointwise.py define the three kinds (listed in
plugins.KERNEL_KINDS). kernel_plan.py holds a kernel's operands and broadcast groups, row_plan.py a row
kernel's layout, statistics and launch arithmetic: facts, no code.
"""
