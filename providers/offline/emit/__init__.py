"""Writing the chosen kernels as program text.

emit.py holds what every generator shares (the `Code` writer, pointwise expressions, the helpers a
program carries); kernel_gen.py the generators' common base; emit_rows*.py, emit_matmul.py (and
emit_gluon.py, Hopper's warp-specialized GEMM) and emit_pointwise.py the generators of each kind;
emit_module.py assembles a whole program: kernels, launchers and `ModelNew`.
"""
