"""The convolution family: a task read as one convolution and fusable work, written as a Triton program.

conv.py is its public API; conv_writer.py the whole-task writer the offline writer asks. Reading:
conv_analysis.py (with conv_calls, conv_builder, conv_regions, conv_values, conv_spec_reader, conv_fold)
builds a `ConvPlan` (conv_ir.py). Writing: conv_codegen.py, in stages (conv_stages.py) whose kernels are
conv_mainloop.py, conv_epilogue.py and conv_kernels.py, with the host side in conv_host.py, the task's
own code in conv_reference.py and pasted text in conv_runtime.py.
"""
