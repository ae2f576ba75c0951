"""A simulated clock and a Timer that reads it: do_bench and autotune without a GPU.

A fake launch advances the clock by the cost it simulates; the timer's marks read the clock, so
``do_bench`` measures exactly the simulated cost of each call."""


class FakeClock:
    def __init__(self):
        self.now_ms = 0.0

    def advance(self, ms: float) -> None:
        self.now_ms += ms

    def seconds(self) -> float:
        return self.now_ms / 1e3


class FakeTimer:
    def __init__(self, clock: FakeClock, flush_cost_ms: float = 0.0):
        self.clock = clock
        self.flush_cost_ms = flush_cost_ms
        self.flushes = 0
        self.marks = 0
        self.closed = False
        self.events = []   # "flush" / "mark" in order

    def flush_l2(self):
        self.flushes += 1
        self.events.append("flush")
        self.clock.advance(self.flush_cost_ms)

    def mark(self):
        self.marks += 1
        self.events.append("mark")
        return self.clock.now_ms

    def synchronize(self):
        pass

    def elapsed_ms(self, start, end):
        return end - start

    def close(self):
        self.closed = True
