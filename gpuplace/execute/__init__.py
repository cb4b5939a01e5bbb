"""Running placed graphs: array backends (numpy, cupy, null), the executor and its schedule,
memory prediction, --verify and the device check."""
