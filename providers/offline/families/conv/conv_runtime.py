"""Source text every conv program carries: the kernel that reads a BatchNorm's running statistics, the
kernel that combines a normalisation's statistics partials, and the host helpers its launcher calls; with
LAYOUT=nhwc, also the tiled transpose that copies the input to channels-last (NHWC_COPY). A persistent
stage's grid and the tiles that fill the SMs are sized by emit.NUM_SMS, the helper the other writers' programs use.

The text itself is Python in runtime/batchnorm.py and runtime/conv.py (linted and type-checked there); the
names here are what conv_codegen pastes. The math helpers the pointwise ops call (_kw_tanh, _kw_softplus,
...) are emit.HELPERS, the ones every offline writer uses, and come in only where a program's ops call them.
"""

from __future__ import annotations

import inspect

from kernelwright.providers.offline.runtime import program_text
from kernelwright.providers.offline.runtime.conv import fit_block

BN_EVAL_KERNEL = program_text("batchnorm", "bn_eval")
NORM_STATS_KERNEL = program_text("batchnorm", "norm_stats")

# LAYOUT=nhwc: the input copied to channels-last by a tiled transpose. torch's permute + contiguous copy
# moved 128 MiB (bf16, 64 x 64 x 128 x 128) in 0.295 ms on an H200, 0.9 TB/s, as long as the convolution
# kernel after it took; a [C, P] -> [P, C] tile copy reads and writes whole lines.
NHWC_COPY = program_text("conv", "nhwc_copy")

# the launcher's helpers, and the channel and K block fit it shares with the writer (conv_host.traced_tile)
HOST_HELPERS = program_text("conv", "conv_host") + "\n\n" + inspect.getsource(fit_block)
