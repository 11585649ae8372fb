"""Blocking calls run without the GIL: another Python thread runs while one is inside them.

Deterministic, with no sleeps or timing. The registry runs in a subprocess that the test stops
(SIGSTOP) before each call, so the call, made in a worker thread, cannot return before the main
thread continues the registry (SIGCONT). The main thread waits for the worker to start,
increments a counter, continues the registry and joins; the worker reads the counter once its
call has returned. A call that released the GIL lets the main thread do all that meanwhile: the
worker reads 1. A call that held it would keep the main thread out until the call gave up (the
library's own registry timeouts) and fail.

The test waits until every thread of the registry shows the stopped state before each call:
the signal is sent at once, but a thread may still run a moment after kill() returns.

The switch interval is raised to 100 s so that a thread holding the GIL keeps it until it gives
it up itself. A control calls a function through ctypes.PyDLL (GIL held; it returns at once):
the main thread can only run once the worker has ended, and the worker reads 0.
"""
import ctypes
import os
import signal
import subprocess
import sys
import threading
import unittest

import tensorhub

REGISTRY = "import sys, tensorhub; c = tensorhub.Context(); print(c.registry_address, flush=True); sys.stdin.read()"


def counter_seen_after(call, release=lambda: None):
    """Runs call() in a thread as described above; returns (counter seen after it, its result)."""
    state = {"counter": 0}
    started = threading.Event()

    def worker():
        started.set()
        try:
            state["result"] = call()
        except Exception as e:  # reported by the main thread
            state["result"] = e
        state["seen"] = state["counter"]

    old = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    try:
        t = threading.Thread(target=worker)
        t.start()
        started.wait()
        state["counter"] += 1
        release()
        t.join()
    finally:
        sys.setswitchinterval(old)
    return state["seen"], state["result"]


def all_threads_stopped(pid):
    """True when every thread of process pid is in the stopped state ('T' in /proc)."""
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:  # the thread ended
            continue
        if state not in ("T", "t"):
            return False
    return True


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
        registry = subprocess.Popen([sys.executable, "-c", REGISTRY], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, env=os.environ)
        stopped = []

        def stop():
            registry.send_signal(signal.SIGSTOP)
            stopped.append(True)
            # kill() returns before every thread has stopped: wait until each one shows 'T'
            # (a registry thread still running could answer the call the test makes next).
            while not all_threads_stopped(registry.pid):
                os.sched_yield()

        def cont():
            registry.send_signal(signal.SIGCONT)
            stopped.clear()

        try:
            addr = registry.stdout.readline().strip()
            self.assertTrue(addr, "the registry process printed no address")
            buf = bytearray(1 << 20)
            with tensorhub.Context(registry=addr, timeout_ms=60000) as ctx:
                src = ctx.open("gil", "trainer")
                src.register("w", bytearray(b"\x5a" * len(buf)))
                src.publish(1)
                dst = ctx.open("gil", "rollout")
                dst.register("w", buf)
                calls = [("replicate", dst.replicate, 1),
                         ("update", dst.update, None),
                         ("unpublish", dst.unpublish, None)]
                for name, call, expected in calls:
                    stop()
                    seen, result = counter_seen_after(call, cont)
                    self.assertEqual(result, expected, name)
                    self.assertEqual(seen, 1, "%s: the main thread did not run during the call: GIL held" % name)
                stop()
                req = dst.ireplicate()  # returns at once: the registry answers the request later
                seen, result = counter_seen_after(req.wait, cont)
                self.assertEqual(result, 1)
                self.assertEqual(seen, 1, "Request.wait: the main thread did not run during the call: GIL held")
                self.assertEqual(bytes(buf), b"\x5a" * len(buf))
                stop()
                seen, _ = counter_seen_after(dst.close, cont)
                self.assertEqual(seen, 1, "close: the main thread did not run during the call: GIL held")
        finally:
            if stopped:
                cont()
            registry.stdin.close()
            registry.wait()


if __name__ == "__main__":
    unittest.main()
