"""Running work on devices: array backends (numpy, cupy), the device check, later the executor."""
