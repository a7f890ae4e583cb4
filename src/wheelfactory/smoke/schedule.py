"""The smoke's order, written down: a list of steps, each naming the steps it waits for, and one runner that starts
each step as soon as those are done — steps that wait for nothing of each other run side by side.

A step is given what the steps it waits for returned, and nothing else: what it needs it must name. A step with a
`timed` name is one of the report's smoke_steps under that name; the others are timed inside (a machine times each
call into the container it makes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from .results import Steps


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[Mapping[str, Any]], Any]  # given the results of the steps it waits for, by name
    after: tuple[str, ...] = ()
    timed: str | None = None  # the name of a smoke step of its own (else its parts are timed inside)


class ScheduleError(Exception):
    """A schedule that cannot run: a step waits for one not in it, or steps wait for each other."""


def ordered(steps: list[Step]) -> list[Step]:
    """`steps` checked: unique names, each waiting only for steps listed before it (so no circle can form)."""
    seen: set[str] = set()
    for step in steps:
        if step.name in seen:
            raise ScheduleError(f"two steps are named {step.name!r}")
        missing = [name for name in step.after if name not in seen]
        if missing:
            raise ScheduleError(f"{step.name!r} waits for {missing}, which no earlier step is")
        seen.add(step.name)
    return steps


def run(steps: list[Step], timings: Steps) -> dict[str, Any]:
    """Run every step once all it waits for are done, side by side where they may be: what each returned, by
    name. The first step that raises stops the schedule (no new step starts) and its exception is raised once the
    running ones have ended."""
    pending = ordered(list(steps))
    results: dict[str, Any] = {}
    running: dict[Future[Any], Step] = {}
    with ThreadPoolExecutor(max(1, len(pending))) as pool:
        failure: BaseException | None = None
        while pending or running:
            if failure is None:
                ready = [s for s in pending if all(name in results for name in s.after)]
                for step in ready:
                    pending.remove(step)
                    given = {name: results[name] for name in step.after}
                    running[pool.submit(_one, step, given, timings)] = step
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                step = running.pop(future)
                if future.exception() is not None:
                    failure = failure or future.exception()
                else:
                    results[step.name] = future.result()
        if failure is not None:
            raise failure
    return results


def _one(step: Step, given: Mapping[str, Any], timings: Steps) -> Any:
    if step.timed is None:
        return step.run(given)
    with timings.timed(step.timed):
        return step.run(given)
