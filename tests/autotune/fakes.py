"""A simulated clock and a Timer that reads it, fake device arrays and a fake launch: do_bench and
autotune without a GPU.

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
        self.events = []   # "flush" / "hold" / "mark" in order
        self.holds = []    # the ms of each hold (GPU time before a mark: never on the simulated clock)

    def flush_l2(self):
        self.flushes += 1
        self.events.append("flush")
        self.clock.advance(self.flush_cost_ms)

    def hold(self, ms):
        self.holds.append(ms)
        self.events.append("hold")

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


class FakeDeviceArray:
    """Looks like a device array to tylo (``__cuda_array_interface__``); never dereferenced."""

    def __init__(self, n, typestr="<f4", ptr=0x7F0000001000):
        self.n, self.typestr, self.ptr = n, typestr, ptr

    @property
    def __cuda_array_interface__(self):
        return {"data": (self.ptr, False), "typestr": self.typestr, "shape": (self.n,), "strides": None,
                "version": 3}


class FakeLaunch:
    """Replaces ``kernel.launch``: records each call and advances the clock by ``cost(call)`` ms."""

    def __init__(self, clock, cost):
        self.clock, self.cost, self.calls = clock, cost, []

    def __call__(self, *args, grid, block, stream=None, cluster=None, **kwargs):
        call = {"args": args, "grid": grid, "block": tuple(block), "cluster": cluster, "kwargs": kwargs}
        self.calls.append(call)
        self.clock.advance(self.cost(call))
