"""Blocking calls run without the GIL: another Python thread runs while one is inside them.

Deterministic, with no sleeps or timing: the switch interval is raised to 100 s, so the thread
that holds the GIL keeps it until it gives it up itself (a blocking wait, or a foreign call that
releases it). The main thread waits for the worker to start, then increments a counter; the
worker reads the counter as soon as its call has returned. If the call released the GIL, the
main thread ran (and incremented) while the worker was inside it, and still holds the GIL when
the call returns, until it blocks in join(): the worker reads 1. If the call held the GIL, the
main thread could only run once the worker's thread ended: the worker reads 0. A control runs
the same steps with a function called through ctypes.PyDLL (GIL held) and must read 0.
"""
import ctypes
import sys
import threading
import unittest

import tensorhub


def counter_seen_after(call):
    """Runs call() in a thread as described above; returns the counter the thread saw after it."""
    state = {"counter": 0}
    started = threading.Event()

    def worker():
        started.set()
        state["result"] = call()
        state["seen"] = state["counter"]

    old = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    try:
        t = threading.Thread(target=worker)
        t.start()
        started.wait()
        state["counter"] += 1
        t.join()
    finally:
        sys.setswitchinterval(old)
    return state["seen"], state.get("result")


class GilTest(unittest.TestCase):
    def test_control_a_call_that_holds_the_gil_is_seen(self):
        held = ctypes.PyDLL(tensorhub.library_path)  # the same library, GIL held during calls
        f = held.THUB_Get_version
        f.argtypes = [ctypes.POINTER(ctypes.c_int)] * 3
        v = [ctypes.c_int() for _ in range(3)]
        seen, result = counter_seen_after(lambda: f(*[ctypes.byref(x) for x in v]))
        self.assertEqual(result, 0)
        self.assertEqual(seen, 0, "the control failed: the main thread ran while the GIL was held")

    def test_blocking_calls_release_the_gil(self):
        buf = bytearray(1 << 20)
        with tensorhub.Context(timeout_ms=60000) as ctx:
            src = ctx.open("gil", "trainer")
            src.register("w", bytearray(b"\x5a" * len(buf)))
            src.publish(1)
            dst = ctx.open("gil", "rollout")
            dst.register("w", buf)
            calls = [("replicate", dst.replicate, 1),
                     ("update", dst.update, None),
                     ("unpublish", dst.unpublish, None)]
            for name, call, expected in calls:
                seen, result = counter_seen_after(call)
                self.assertEqual(result, expected, name)
                self.assertEqual(seen, 1, "%s: the main thread did not run during the call: GIL held" % name)
            req = dst.ireplicate()
            seen, result = counter_seen_after(req.wait)
            self.assertEqual(result, 1)
            self.assertEqual(seen, 1, "Request.wait: the main thread did not run during the call: GIL held")
            seen, _ = counter_seen_after(dst.close)
            self.assertEqual(seen, 1, "close: the main thread did not run during the call: GIL held")
            self.assertEqual(bytes(buf), b"\x5a" * len(buf))


if __name__ == "__main__":
    unittest.main()
