"""The ONNX operators gpuplace supports, one registry op each, named by the ONNX op type verbatim
(`Gemm`, `Conv`, ...): ONNX semantics, attrs and defaults (opset 13-20), an xp-generic compute
that runs on numpy and cupy alike, and a FLOP count (`OpDef.flops`). They are not TensorFlow's:
`kernel_match` is None and `kernels` is CPU and GPU. `nn.py`: dense, convolution and
normalisation math."""
