"""The one table of aten op families: which kind of computation an aten op is (matmul, conv, reduction,
softmax, norm, scan, loss, pool, pointwise), by the op's name without namespace or overload.

Two readers take it: a task's signature (tasks/analysis.py: the families a task computes, which similar
tasks share) and the offline writer, which names a row kernel's design family after the ops it holds
(providers/offline/operators.py `ROW_FAMILY_OF`). One table, so that a task and the kernels written for
it speak of the same family. Ops that only move or describe data have no family (tasks/analysis.py).
"""

from __future__ import annotations

_FAMILIES: dict[str, str] = {
    "matmul": "mm addmm bmm baddbmm addbmm mv addmv dot vdot matmul linear outer ger _addmm_activation "
    "_scaled_mm einsum _scaled_dot_product_flash_attention _scaled_dot_product_flash_attention_for_cpu "
    "_scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention "
    "scaled_dot_product_attention",
    "conv": "convolution _convolution conv1d conv2d conv3d conv_transpose1d conv_transpose2d "
    "conv_transpose3d cudnn_convolution mkldnn_convolution _slow_conv2d_forward slow_conv3d_forward "
    "slow_conv_transpose2d slow_conv_transpose3d slow_conv_dilated2d slow_conv_dilated3d "
    "convolution_overrideable _nnpack_spatial_convolution",
    "reduction": "sum mean prod amax amin max min argmax argmin aminmax logsumexp var std var_mean std_mean "
    "nansum nanmean median nanmedian mode all any count_nonzero",
    "softmax": "_softmax _log_softmax softmax log_softmax _safe_softmax",
    "norm": "native_layer_norm layer_norm native_group_norm group_norm native_batch_norm batch_norm "
    "_native_batch_norm_legit _native_batch_norm_legit_no_training _native_batch_norm_legit_functional "
    "_batch_norm_with_update _batch_norm_no_update instance_norm rms_norm _fused_rms_norm linalg_vector_norm "
    "norm renorm frobenius_norm nuclear_norm",
    "scan": "cumsum cumprod cummax cummin logcumsumexp _cummax_helper _cummin_helper",
    # cosine_similarity and pairwise_distance: a row reduction of two inputs, written as the losses are.
    "loss": "mse_loss l1_loss smooth_l1_loss huber_loss nll_loss nll_loss_forward nll_loss2d nll_loss2d_forward "
    "nll_loss_nd cross_entropy_loss binary_cross_entropy binary_cross_entropy_with_logits kl_div "
    "soft_margin_loss multi_margin_loss multilabel_margin_loss_forward hinge_embedding_loss "
    "margin_ranking_loss triplet_margin_loss cosine_embedding_loss poisson_nll_loss cosine_similarity "
    "pairwise_distance",
    "pool": "max_pool1d max_pool2d max_pool3d max_pool2d_with_indices max_pool3d_with_indices avg_pool1d "
    "avg_pool2d avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d _adaptive_avg_pool2d "
    "_adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d "
    "fractional_max_pool2d fractional_max_pool3d _mkldnn_pooling lp_pool1d lp_pool2d max_unpool2d",
    "pointwise": "add sub mul div rsub true_divide where clamp clamp_min clamp_max masked_fill "
    "dropout native_dropout bernoulli pow rsqrt",
}

ATEN_FAMILY: dict[str, str] = {name: family for family, names in _FAMILIES.items() for name in names.split()}
"""aten op name (`layer_norm`, `_softmax`) -> its family."""
