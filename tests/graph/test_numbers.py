"""Numbers in specs as users write them (YAML 1.2: `1e3`, `010`, `0o17`), float errors that
give inf and nan silently (as TensorFlow), and the spec errors around them, end to end."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from textwrap import dedent

import pytest
import yaml

from gpuplace.errors import BadInput
from gpuplace.graph import loads
from tests.conftest import Run


def value(text: str) -> object:
    """The `value:` of a constant written as `text` in YAML."""
    graph = loads(f"graph:\n  - {{name: a, op: constant, value: {text}}}\n", "s.yaml")
    return graph.ops[0].attrs["value"]


def error(text: str, source: str = "s.yaml") -> str:
    with pytest.raises(BadInput) as info:
        loads(dedent(text).lstrip("\n"), source)
    assert info.value.exit_code == 2
    return str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1e3", 1000.0), ("1E-3", 0.001), ("-2e5", -200000.0), ("+1e3", 1000.0),
        ("1.5e3", 1500.0), ("2.5E-3", 0.0025), ("5.e3", 5000.0), (".5e1", 5.0), ("-.5", -0.5),
        ("+.5", 0.5), ("1.0e+3", 1000.0), ("1_000", 1000), ("1_000.5", 1000.5), ("0x10", 16),
        ("0o17", 15), ("-0o17", -15), ("017", 17), ("010", 10), ("08", 8), ("+12", 12),
        ("0b101", 5), ("0", 0), ("-7", -7), (".inf", math.inf), ("-.inf", -math.inf),
        ("1e400", math.inf),
    ],
)  # fmt: skip
def test_yaml_numbers_read_as_yaml_1_2_and_json_read_them(text: str, expected: float) -> None:
    got = value(text)
    assert (got, type(got)) == (expected, type(expected))


def test_nan_is_a_float() -> None:
    got = value(".nan")
    assert type(got) is float and math.isnan(got)


def test_exponents_work_wherever_a_number_is_expected() -> None:
    graph = loads(
        dedent("""
            graph:
              - {name: r, op: random_normal, shape: [2], mean: 1e-3, stddev: 1e-3, seed: 1}
              - {name: u, op: random_uniform, shape: [2], minval: -1e2, maxval: 1E2}
              - {name: w, op: variable, shape: [2], initializer: constant, value: [1e3, 2e-3]}
            """),
        "s.yaml",
    )
    attrs = [op.attrs for op in graph.ops]
    assert (attrs[0]["mean"], attrs[0]["stddev"]) == (0.001, 0.001)
    assert (attrs[1]["minval"], attrs[1]["maxval"]) == (-100.0, 100.0)
    assert attrs[2]["value"] == [1000.0, 0.002]


def test_pyyaml_itself_is_left_alone() -> None:
    # the loader subclasses the C SafeLoader: yaml.safe_load keeps YAML 1.1
    assert yaml.safe_load("[1e3, 010, 0o17]") == ["1e3", 8, "0o17"]


def test_the_loader_keeps_the_c_loader() -> None:
    from gpuplace import yaml_text

    assert issubclass(yaml_text._Loader, yaml.CSafeLoader)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("graph:\n  - {name: a, op: constant, value: '1e3'}\n",
         "s.yaml:2: op 'a' (constant): value: '1e3' is not accepted; expected a number or a "
         "(nested) list of numbers, e.g. 1.0 or [1.0, 2.0]; it is quoted, so it is text: drop the "
         "quotes"),
        ('graph:\n  - {name: a, op: random_normal, shape: [2], stddev: "1e-3"}\n',
         "s.yaml:2: op 'a' (random_normal): stddev: '1e-3' is not accepted; expected a number, "
         "e.g. 0.5; it is quoted, so it is text: drop the quotes"),
        ("graph:\n  - {name: a, op: constant, value: inf}\n",
         "s.yaml:2: op 'a' (constant): value: 'inf' is not accepted; expected a number or a "
         "(nested) list of numbers, e.g. 1.0 or [1.0, 2.0]; for infinity or not-a-number write "
         ".inf, -.inf or .nan (Infinity or NaN in JSON)"),
        ("graph:\n  - {name: a, op: constant, value: 1e}\n",
         "s.yaml:2: op 'a' (constant): value: '1e' is not accepted; expected a number or a "
         "(nested) list of numbers, e.g. 1.0 or [1.0, 2.0]"),
        ("graph:\n  - {name: a, op: zeros, shape: [1e3]}\n",
         "s.yaml:2: op 'a' (zeros): shape: [1000.0] is not accepted; expected a list of "
         "non-negative integers, e.g. [2, 3] ([] for a scalar)"),
        ("graph:\n  - {name: a, op: random_normal, shape: [2], stddev: true}\n",
         "s.yaml:2: op 'a' (random_normal): stddev: True is not accepted; expected a number, "
         "e.g. 0.5"),
        ("graph:\n  - {name: a, op: constant, value: true}\n",
         "s.yaml:2: op 'a' (constant): value true is a boolean, which does not fit dtype float32; "
         "give numbers, or dtype: bool"),
        ("graph:\n  - {name: a, op: fill, shape: [2], value: yes}\n",
         "s.yaml:2: op 'a' (fill): value true is a boolean, which does not fit dtype float32; "
         "give numbers, or dtype: bool"),
        ("graph:\n  - {name: a, op: constant, value: [1.0, false], dtype: int32}\n",
         "s.yaml:2: op 'a' (constant): value false is a boolean, which does not fit dtype int32; "
         "give numbers, or dtype: bool"),
        ("graph:\n  - {name: a, op: constant, value: [true, 1], dtype: bool}\n",
         "s.yaml:2: op 'a' (constant): value 1 does not fit dtype bool; give true or false, or a "
         "numeric dtype"),
        ("graph:\n  - {name: a, op: constant, value: .nan, dtype: int32}\n",
         "s.yaml:2: op 'a' (constant): value nan does not fit dtype int32; give integers in "
         "[-2147483648, 2147483647], or a float dtype"),
        ("graph:\n  - {name: a, op: random_normal, shape: [2], stddev: .nan}\n",
         "s.yaml:2: op 'a' (random_normal): stddev must be a finite number, got nan"),
        ("graph:\n  - {name: a, op: random_uniform, shape: [2], maxval: .inf}\n",
         "s.yaml:2: op 'a' (random_uniform): maxval must be a finite number, got inf"),
        ("graph:\n  - {name: w, op: variable, shape: [2], initializer: random_normal, mean: -.inf}\n",
         "s.yaml:2: op 'w' (variable): mean must be a finite number, got -inf"),
        ("graph:\n  - {name: a, op: zeros, shape: [0], dtype: int32}\n"
         "  - {name: m, op: reduce_mean, inputs: [a]}\n",
         "s.yaml:3: Integer division by zero: the mean of an empty dimension for 'm' (op: 'Mean') "
         "with input shapes: [0]. Fix: reduce over dimensions of size >= 1, or cast to a float "
         "dtype first (the mean of nothing is then nan)"),
    ],
)  # fmt: skip
def test_numbers_that_are_not_accepted(text: str, expected: str) -> None:
    assert error(text) == expected


def test_bool_values_with_dtype_bool_are_accepted() -> None:
    graph = loads("graph: [{name: a, op: constant, value: [true, false], dtype: bool}]\n")
    assert graph.ops[0].attrs["value"] == [True, False]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "s.yaml: the file is empty; a spec needs a 'graph:' list of ops, e.g. graph: "
             "[{name: a, op: constant, value: 1.0}]"),
        ("  \n\n", "s.yaml: the file is empty; a spec needs a 'graph:' list of ops, e.g. graph: "
                   "[{name: a, op: constant, value: 1.0}]"),
        ("# only a comment\n", "s.yaml: the file holds no data (only comments or null); a spec "
                               "needs a 'graph:' list of ops, e.g. graph: "
                               "[{name: a, op: constant, value: 1.0}]"),
        ("null\n", "s.yaml: the file holds no data (only comments or null); a spec needs a "
                   "'graph:' list of ops, e.g. graph: [{name: a, op: constant, value: 1.0}]"),
        ("config: {log_device_placement: true}\n",
         "s.yaml:1: the spec has no 'graph:'; a spec needs a list of ops, e.g. graph: "
         "[{name: a, op: constant, value: 1.0}]"),
    ],
)  # fmt: skip
def test_empty_specs(text: str, expected: str) -> None:
    assert error(text) == expected


CONFIG_ERRORS = [
    ("config: {placement: {strategy: greedy}}\ngraph: [{op: zeros, shape: [1]}]\n",
     "s.yaml:1: config.placement: placement strategy 'greedy' is not one of tensorflow, "
     "balanced, round-robin"),
    ("config:\n  placement:\n    strategy: balance\ngraph: [{op: zeros, shape: [1]}]\n",
     "s.yaml:3: config.placement: placement strategy 'balance' is not one of tensorflow, "
     "balanced, round-robin; did you mean 'balanced'?"),
    ("config:\n  placement:\n    stratgy: balanced\ngraph: [{op: zeros, shape: [1]}]\n",
     "s.yaml:3: config.placement: unknown key 'stratgy'; did you mean 'strategy'?"),
    ("config:\n  gpu_options:\n    per_process_gpu_memory_fraction: 2\n"
     "graph: [{op: zeros, shape: [1]}]\n",
     "s.yaml:3: config.gpu_options.per_process_gpu_memory_fraction: expected a number in (0, 1] "
     "(e.g. 0.4 for 40% of each GPU's memory), got 2"),
    ("config:\n  gpu_options:\n    per_process_gpu_memory_fraction: 0\n"
     "graph: [{op: zeros, shape: [1]}]\n",
     "s.yaml:3: config.gpu_options.per_process_gpu_memory_fraction: expected a number in (0, 1] "
     "(e.g. 0.4 for 40% of each GPU's memory), got 0"),
    ("config:\n  gpu_options:\n    experimental:\n      virtual_devices: {memory_limit_mb: [1]}\n"
     "graph: [{op: zeros, shape: [1]}]\n",
     "s.yaml:4: config.gpu_options.experimental.virtual_devices: expected a list, one entry per "
     "visible GPU, e.g. [{memory_limit_mb: [2048, 2048]}], got {'memory_limit_mb': [1]}"),
    ("config:\n  gpu_options:\n    experimental:\n      virtual_devices:\n"
     "        - {memory_limit_mb: [1024]}\n        - {memory_limit_mb: [0]}\n"
     "graph: [{op: zeros, shape: [1]}]\n",
     "s.yaml:6: config.gpu_options.experimental.virtual_devices[1]: expected "
     "{memory_limit_mb: [MB, ...]} with numbers > 0, e.g. {memory_limit_mb: [2048, 2048]}, got "
     "{'memory_limit_mb': [0]}"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), CONFIG_ERRORS)
def test_config_errors_have_file_and_line(text: str, expected: str) -> None:
    assert error(text) == expected


def test_config_errors_in_json_have_their_line_too() -> None:
    text = '{"graph": [{"op": "zeros", "shape": [1]}],\n "config": {"placement": {"strategy": 1}}}'
    assert error(text, "s.json") == (
        "s.json:2: config.placement: placement strategy 1 is not one of tensorflow, balanced, "
        "round-robin"
    )


def test_config_accepts_every_strategy_and_a_fraction_of_one() -> None:
    for strategy in ("tensorflow", "balanced", "round-robin"):
        graph = loads(
            f"config: {{placement: {{strategy: {strategy}}}, "
            "gpu_options: {per_process_gpu_memory_fraction: 1}}\n"
            "graph: [{op: zeros, shape: [1]}]\n"
        )
        assert graph.config.placement == {"strategy": strategy}


# ---- end to end: `gpuplace run`, exit codes, nothing but the message on stderr ----


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> str:
    path = tmp_path / name
    path.write_text(dedent(text).lstrip("\n"))
    return str(path)


def quiet_run(run: Run, *args: str) -> tuple[int, str, str]:
    """`run` with every warning an error: a numpy RuntimeWarning would fail the command."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = run("--machine", "1xK40c", *args)
    return result.code, result.out, result.err


def test_run_reads_exponents(run: Run, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        graph:
          - {name: a, op: constant, value: 1e3}
          - {name: b, op: constant, value: -2.5E-1}
          - {name: c, op: mul, inputs: [a, b]}
        """,
    )
    code, out, err = quiet_run(run, "run", path)
    assert (code, err) == (0, "")
    assert out.endswith("c:\n-250.0\n")


@pytest.mark.parametrize(
    ("ops", "printed"),
    [
        ("[{name: a, op: constant, value: [0.0, -1.0, 1.0]}, {name: b, op: log, inputs: [a]}]",
         "b:\n[-inf  nan   0.]\n"),
        ("[{name: a, op: constant, value: [1, 0, -1], dtype: int32}, "
         "{name: z, op: zeros, shape: [3], dtype: int32}, {name: d, op: div, inputs: [a, z]}]",
         "d:\n[ inf  nan -inf]\n"),
        ("[{name: a, op: constant, value: [1.0e+30]}, {name: m, op: mul, inputs: [a, a]}, "
         "{name: e, op: exp, inputs: [m]}]",
         "e:\n[inf]\n"),
        ("[{name: a, op: constant, value: [-1000.0]}, {name: s, op: sigmoid, inputs: [a]}]",
         "s:\n[0.]\n"),
        ("[{name: a, op: zeros, shape: [2, 0]}, {name: m, op: reduce_mean, inputs: [a], axis: 1}]",
         "m:\n[nan nan]\n"),
        ("[{name: a, op: constant, value: 1e39}]", "a:\ninf\n"),
        ("[{name: a, op: constant, value: [.nan]}, {name: c, op: cast, inputs: [a], dtype: float16}]",
         "c:\n[nan]\n"),
    ],
)  # fmt: skip
def test_float_errors_give_inf_and_nan_without_warnings(
    run: Run, tmp_path: Path, ops: str, printed: str
) -> None:
    code, out, err = quiet_run(run, "run", write(tmp_path, f"graph: {ops}\n"))
    assert (code, err) == (0, "")
    assert out.endswith(printed)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ": the file is empty; a spec needs a 'graph:' list of ops, e.g. graph: "
             "[{name: a, op: constant, value: 1.0}]"),
        (CONFIG_ERRORS[0][0], ":1: config.placement: placement strategy 'greedy' is not one of "
                              "tensorflow, balanced, round-robin"),
        (CONFIG_ERRORS[3][0], ":3: config.gpu_options.per_process_gpu_memory_fraction: expected a "
                              "number in (0, 1] (e.g. 0.4 for 40% of each GPU's memory), got 2"),
        ("graph: [{name: a, op: constant, value: '1e3'}]\n",
         ":1: op 'a' (constant): value: '1e3' is not accepted; expected a number or a (nested) "
         "list of numbers, e.g. 1.0 or [1.0, 2.0]; it is quoted, so it is text: drop the quotes"),
    ],
)  # fmt: skip
def test_run_errors_are_one_line_exit_2(run: Run, tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    for command in ("run", "plan"):
        assert quiet_run(run, command, path) == (2, "", f"error: {path}{expected}\n")
