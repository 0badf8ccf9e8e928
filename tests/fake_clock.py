"""A clock of the tests' own, and a fake model whose answers take its time (`-M
respond=fake_clock:slow`): a --budget's deadline on that clock binds the same on any machine."""


class Clock:
    """Each fake generation advances it by `step` seconds; after `slow_after` generations by
    `slow_step` (a model that slows down, as on a machine others load)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.t, self.step, self.generations, self.slow_after, self.slow_step = 0.0, 1.0, 0, None, 1.0

    def now(self) -> float:
        return self.t


CLOCK = Clock()


def slow(prompt: str) -> str:
    """The fake model's answer to a generation, which takes CLOCK's time."""
    CLOCK.generations += 1
    late = CLOCK.slow_after is not None and CLOCK.generations > CLOCK.slow_after
    CLOCK.t += CLOCK.slow_step if late else CLOCK.step
    return "Yes"


def on_clock(from_flags):
    """`selection.from_flags` with a --budget's deadline on CLOCK (monkeypatched in for a CLI run)."""
    def flags(**kw):
        selection = from_flags(**kw, started=CLOCK.now())
        selection.clock = CLOCK.now
        return selection
    return flags
