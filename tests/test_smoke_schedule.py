"""The smoke's runner: each step once all it waits for are done, side by side where nothing orders them, given only
what it named; a failure stops the schedule; a schedule that names a step it cannot wait for is refused."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from wheelfactory.smoke.results import Steps
from wheelfactory.smoke.schedule import ScheduleError, Step, run


def test_each_step_waits_for_what_it_names_and_no_more() -> None:
    # Two steps that wait for nothing of each other meet at a barrier: only side by side can both pass it.
    meet = threading.Barrier(2, timeout=10)
    order: list[str] = []
    lock = threading.Lock()

    def note(name: str, value: Any) -> Any:
        with lock:
            order.append(name)
        return value

    def given(done: Mapping[str, Any]) -> list[str]:
        return sorted(done)

    steps = [
        Step("venvs", lambda _: note("venvs", 1)),
        Step("pip", lambda d: (meet.wait(), note("pip", d["venvs"] + 1))[1], ("venvs",)),
        Step("target", lambda d: (meet.wait(), note("target", d["venvs"] + 10))[1], ("venvs",)),
        Step("tier", given, ("pip", "target")),
    ]
    timings = Steps()
    done = run(steps, timings)
    assert done == {"venvs": 1, "pip": 2, "target": 11, "tier": ["pip", "target"]}
    assert order[0] == "venvs" and set(order[1:]) == {"pip", "target"}


def test_a_timed_step_is_one_of_the_smoke_steps_under_its_name() -> None:
    timings = Steps()
    run([Step("a: sleep", lambda _: time.sleep(0.05), timed="sleep"), Step("quick", lambda _: None)], timings)
    (step,) = timings.as_json()
    assert step["name"] == "sleep" and float(step["seconds"]) >= 0.05  # type: ignore[arg-type]


def test_a_failing_step_stops_the_schedule_once_the_running_ones_end() -> None:
    ran: list[str] = []
    slow_done = threading.Event()

    def slow(_: Mapping[str, Any]) -> None:
        time.sleep(0.2)
        slow_done.set()

    def fails(_: Mapping[str, Any]) -> None:
        raise RuntimeError("pip failed")

    steps = [
        Step("slow", slow),
        Step("fails", fails),
        Step("after", lambda _: ran.append("after"), ("fails",)),
        Step("after slow", lambda _: ran.append("after slow"), ("slow",)),
    ]
    with pytest.raises(RuntimeError, match="pip failed"):
        run(steps, Steps())
    assert slow_done.is_set() and ran == []  # nothing new started; what ran was let finish


@pytest.mark.parametrize(
    ("steps", "says"),
    [
        ([Step("a", lambda _: 1, ("b",)), Step("b", lambda _: 2)], "'a' waits for ['b'], which no earlier step is"),
        ([Step("a", lambda _: 1, ("a",))], "'a' waits for ['a']"),
        ([Step("a", lambda _: 1), Step("a", lambda _: 2)], "two steps are named 'a'"),
    ],
)
def test_a_schedule_that_cannot_run_is_refused_before_any_step(steps: list[Step], says: str) -> None:
    with pytest.raises(ScheduleError, match=says.replace("[", r"\[").replace("]", r"\]")):
        run(steps, Steps())
