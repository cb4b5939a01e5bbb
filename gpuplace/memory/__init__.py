"""TensorFlow's GPU memory policies (preallocate, allow_growth, fraction, limit, logical GPUs)."""
