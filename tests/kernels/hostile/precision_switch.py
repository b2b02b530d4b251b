# Class 6: turn on TF32 for torch's own convolutions and matmuls (past the static check, through getattr
# on torch._C): torch ops left in the candidate would run at a precision the reference was not held to.
class ModelNew(nn.Module):
    def forward(self, x):
        getattr(torch._C, "_set_cudnn_" + "allow_tf32")(True)
        return relu(x)
