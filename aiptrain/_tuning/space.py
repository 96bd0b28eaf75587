"""The search space of a tuning job: its parameters, their scales, and how values reach a trainer.

Each ParameterSpec becomes one typed parameter:

- DOUBLE: a float in [minValue, maxValue];
- INTEGER: a whole number in [minValue, maxValue];
- DISCRETE: one of `discreteValues` (increasing numbers);
- CATEGORICAL: one of `categoricalValues` (strings).

Scales (DOUBLE and INTEGER). Samplers do not see the value itself but a *sampler coordinate*:

- UNIT_LINEAR_SCALE (or none): the value; sampled uniformly.
- UNIT_LOG_SCALE: the value, sampled uniformly in log space (log-uniform).
- UNIT_REVERSE_LOG_SCALE: the range reflected onto itself, `low + high - value`, sampled
  log-uniformly; the value is reflected back. So `value = low + high - L` with `L` log-uniform on
  [low, high]: dense near `high` and sparse near `low`, the mirror image of the log scale, which
  is the service's meaning ("values close to the top of the feasible space are spread out more").

DISCRETE values are searched by their position in the increasing list (an ordered integer
coordinate), so neighbours in the list are neighbours to the search; the list's own spacing already
expresses any scale. CATEGORICAL values are unordered choices.

Values reach the trainer as `--NAME=VALUE` (the service's format), written so argparse's `int`
and `float` accept them: INTEGER values (and DISCRETE values that are whole numbers) without a
`.0`, other numbers in Python's shortest round-trip form.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aiptrain._job.spec import HyperparameterSpec, ParameterSpec, ParameterType, ScaleType

ParameterValue = int | float | str
SamplerCoordinate = int | float | str
# How close a number must be to a DISCRETE value to be that value (relative).
_DISCRETE_TOLERANCE = 1e-9


class Scale(enum.Enum):
    LINEAR = "linear"
    LOG = "log"
    REVERSE_LOG = "reverse_log"

    @classmethod
    def of(cls, scale_type: ScaleType | None) -> Scale:
        if scale_type == ScaleType.UNIT_LOG_SCALE:
            return cls.LOG
        if scale_type == ScaleType.UNIT_REVERSE_LOG_SCALE:
            return cls.REVERSE_LOG
        return cls.LINEAR

    @property
    def is_logarithmic(self) -> bool:
        return self is not Scale.LINEAR


@dataclass(frozen=True)
class DoubleParameter:
    name: str
    low: float
    high: float
    scale: Scale = Scale.LINEAR


@dataclass(frozen=True)
class IntegerParameter:
    name: str
    low: int
    high: int
    scale: Scale = Scale.LINEAR


@dataclass(frozen=True)
class DiscreteParameter:
    name: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class CategoricalParameter:
    name: str
    values: tuple[str, ...]


Parameter = DoubleParameter | IntegerParameter | DiscreteParameter | CategoricalParameter


def parameter_from_spec(spec: ParameterSpec) -> Parameter:
    """The typed parameter of a validated ParameterSpec (`validate.check_hyperparameters`)."""
    name = spec.parameter_name or ""
    scale = Scale.of(spec.scale_type)
    if spec.type == ParameterType.DOUBLE:
        return DoubleParameter(name, float(spec.min_value or 0.0), float(spec.max_value or 0.0), scale)
    if spec.type == ParameterType.INTEGER:
        return IntegerParameter(name, int(spec.min_value or 0), int(spec.max_value or 0), scale)
    if spec.type == ParameterType.DISCRETE:
        return DiscreteParameter(name, tuple(float(v) for v in spec.discrete_values or ()))
    if spec.type == ParameterType.CATEGORICAL:
        return CategoricalParameter(name, tuple(spec.categorical_values or ()))
    raise ValueError(f"parameter {name!r} has no type")


# -- values as text ---------------------------------------------------------------------------


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def format_value(parameter: Parameter, value: ParameterValue) -> str:
    """The value as the trainer receives it (and as trainingOutput reports it)."""
    if isinstance(parameter, CategoricalParameter):
        return str(value)
    if isinstance(parameter, IntegerParameter):
        return str(int(value))
    if isinstance(parameter, DiscreteParameter):
        return _number_text(float(value))
    return repr(float(value))


def parse_value(parameter: Parameter, text: str) -> ParameterValue:
    """The value `text` names in this parameter's space; ValueError if it lies outside."""
    if isinstance(parameter, CategoricalParameter):
        if text not in parameter.values:
            raise ValueError(f"{text!r} is not one of {list(parameter.values)}")
        return text
    number = float(text)
    if isinstance(parameter, DiscreteParameter):
        return parameter.values[discrete_index(parameter, number)]
    if not parameter.low <= number <= parameter.high:
        raise ValueError(f"{text} is outside [{parameter.low}, {parameter.high}]")
    if isinstance(parameter, IntegerParameter):
        if not number.is_integer():
            raise ValueError(f"{text} is not a whole number")
        return int(number)
    return number


def discrete_index(parameter: DiscreteParameter, number: float) -> int:
    for index, value in enumerate(parameter.values):
        if math.isclose(value, number, rel_tol=_DISCRETE_TOLERANCE, abs_tol=_DISCRETE_TOLERANCE):
            return index
    raise ValueError(f"{number} is not one of {list(parameter.values)}")


# -- sampler coordinates ----------------------------------------------------------------------


def to_coordinate(parameter: Parameter, value: ParameterValue) -> SamplerCoordinate:
    """Where a sampler sees `value`: reflected for reverse log, the list position for DISCRETE."""
    if isinstance(parameter, DiscreteParameter):
        return discrete_index(parameter, float(value))
    if isinstance(parameter, CategoricalParameter):
        return str(value)
    reflect = parameter.scale is Scale.REVERSE_LOG
    if isinstance(parameter, IntegerParameter):
        whole = int(value)
        return parameter.low + parameter.high - whole if reflect else whole
    number = float(value)
    return parameter.low + parameter.high - number if reflect else number


def from_coordinate(parameter: Parameter, coordinate: SamplerCoordinate) -> ParameterValue:
    """The value a sampler coordinate stands for (the inverse of `to_coordinate`)."""
    if isinstance(parameter, DiscreteParameter):
        return parameter.values[int(coordinate)]
    if isinstance(parameter, CategoricalParameter):
        return str(coordinate)
    number = float(coordinate)
    if parameter.scale is Scale.REVERSE_LOG:
        number = parameter.low + parameter.high - number
    if isinstance(parameter, IntegerParameter):
        return min(max(round(number), parameter.low), parameter.high)
    return min(max(number, parameter.low), parameter.high)


# -- grid -------------------------------------------------------------------------------------


def grid_size(parameter: Parameter) -> int:
    if isinstance(parameter, IntegerParameter):
        return parameter.high - parameter.low + 1
    if isinstance(parameter, DiscreteParameter | CategoricalParameter):
        return len(parameter.values)
    raise ValueError(f"a DOUBLE parameter ({parameter.name}) has no grid")


def grid_value(parameter: Parameter, position: int) -> ParameterValue:
    if isinstance(parameter, IntegerParameter):
        return parameter.low + position
    if isinstance(parameter, DiscreteParameter | CategoricalParameter):
        return parameter.values[position]
    raise ValueError(f"a DOUBLE parameter ({parameter.name}) has no grid")


# -- the whole space --------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchSpace:
    parameters: tuple[Parameter, ...]

    @classmethod
    def from_spec(cls, spec: HyperparameterSpec) -> SearchSpace:
        return cls(tuple(parameter_from_spec(param) for param in spec.params or ()))

    @property
    def names(self) -> list[str]:
        return [parameter.name for parameter in self.parameters]

    def as_text(self, values: Mapping[str, ParameterValue]) -> dict[str, str]:
        """name -> value as text, in parameter order (trainingOutput's `hyperparameters`)."""
        return {p.name: format_value(p, values[p.name]) for p in self.parameters}

    def arguments(self, values: Mapping[str, ParameterValue]) -> list[str]:
        """`--NAME=VALUE` for every parameter, appended to the trainer's arguments."""
        return [f"--{name}={text}" for name, text in self.as_text(values).items()]

    def parse(self, texts: Mapping[str, str]) -> dict[str, ParameterValue]:
        """The values a reported trial used; ValueError if one is missing or outside the space."""
        values: dict[str, ParameterValue] = {}
        for parameter in self.parameters:
            if parameter.name not in texts:
                raise ValueError(f"no value for {parameter.name}")
            values[parameter.name] = parse_value(parameter, texts[parameter.name])
        return values

    def key(self, values: Mapping[str, ParameterValue]) -> tuple[str, ...]:
        """A hashable identity of a combination (its values as text)."""
        return tuple(self.as_text(values).values())


def grid_combinations_count(parameters: Sequence[Parameter]) -> int:
    return math.prod(grid_size(parameter) for parameter in parameters)


def grid_combination(parameters: Sequence[Parameter], position: int) -> dict[str, ParameterValue]:
    """The combination at `position` of the grid, the last parameter varying fastest.

    Computed from the position (mixed radix), so a grid of any size costs nothing to walk.
    """
    values: dict[str, ParameterValue] = {}
    remaining = position
    for parameter in reversed(parameters):
        remaining, digit = divmod(remaining, grid_size(parameter))
        values[parameter.name] = grid_value(parameter, digit)
    return {parameter.name: values[parameter.name] for parameter in parameters}
