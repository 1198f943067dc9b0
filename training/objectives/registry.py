"""The registry of training objectives: `register_objective` (a class decorator) and `get_objective` by name."""

from __future__ import annotations

from typing import TypeVar

from .base import Objective

ObjectiveClass = TypeVar("ObjectiveClass", bound=type[Objective])

OBJECTIVES: dict[str, type[Objective]] = {}  # name -> objective class, in registration order


def register_objective(objective: ObjectiveClass) -> ObjectiveClass:
    """Make ``objective`` (an `Objective` subclass) available as ``--objective objective.name``; returns it, so
    that it can decorate the class. Raises `ValueError` when another objective has the name."""
    if not (isinstance(objective, type) and issubclass(objective, Objective)):
        raise ValueError(f"register_objective takes an Objective subclass, got {objective!r}.")
    known = OBJECTIVES.get(objective.name)
    if known is not None and known is not objective:
        raise ValueError(
            f"An objective named {objective.name!r} is registered already ({known.__name__}); give "
            f"{objective.__name__} another name."
        )
    OBJECTIVES[objective.name] = objective
    return objective


def objective_names() -> list[str]:
    """The registered objectives' names."""
    return list(OBJECTIVES)


def get_objective(name: str) -> type[Objective]:
    """The objective class registered as ``name``; raises `ValueError` naming the choices."""
    if name not in OBJECTIVES:
        raise ValueError(f"Unknown objective {name!r}; choose one of {', '.join(OBJECTIVES)} (--objective).")
    return OBJECTIVES[name]


def objective_for(options) -> Objective:
    """The objective a run of ``options`` (a `TrainConfig`) trains, with its settings."""
    return get_objective(options.objective).from_options(options)
