"""The writer's front end: a task's source read into the writer's IR.

analysis.py runs the task's source, builds `Model` on the meta device and traces its forward (again at
other sizes, to find what is read at run time); lowering.py turns the traced aten ops into the IR of
ir.py through one handler per op, kept by kind of op in lowering_pointwise.py, lowering_rows.py and
lowering_views.py (listed in plugins.LOWERINGS).
"""
