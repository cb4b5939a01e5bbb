"""The hostile-input suite and the CLI fuzzer of issue #12 (see test_hostile.py, test_fuzz_cli.py)."""
