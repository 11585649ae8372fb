"""A Python trainer and a C rollout in another process: examples/trainer_rollout.c's rollout
(`trainer_rollout rollout STEPS MIB`) replicates and updates from this process's tensors and
checks every element of every version it holds (its model: docs in trainer_rollout.c)."""
import os
import subprocess
import unittest

import tensorhub
from thubtest import needs_numpy, np

STEPS, MIB = 3, 2


def layout(mib):
    half = mib * 262144 // 2  # int32 elements
    return [("embed.weight", half), ("head.weight", half - 16), ("head.bias", 16)]


def values(version, tensor, count):
    """trainer_rollout.c's value(v, t, i) = (v*1000003 + t*7919 + i*31) mod 2147483647, as int32."""
    i = np.arange(count, dtype=np.int64)
    return ((version * 1000003 + tensor * 7919 + i * 31) % 2147483647).astype(np.int32)


@needs_numpy
class CInteropTest(unittest.TestCase):
    def test_python_trainer_c_rollout(self):
        program = os.environ.get("THUB_TRAINER_ROLLOUT")
        if not program or not os.path.exists(program):
            self.skipTest("examples/trainer_rollout is not built (THUB_TRAINER_ROLLOUT=%r)" % program)
        with tensorhub.Context(timeout_ms=60000) as ctx:
            m = ctx.open("policy", "trainer")
            tensors = [np.zeros(count, dtype=np.int32) for _, count in layout(MIB)]
            for (name, _), a in zip(layout(MIB), tensors):
                m.register(name, a)
            for t, a in enumerate(tensors):
                a[:] = values(1, t, a.size)
            m.publish(1)
            env = dict(os.environ, TENSORHUB_REGISTRY=ctx.registry_address)
            rollout = subprocess.Popen([program, "rollout", str(STEPS), str(MIB)], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                for v in range(1, STEPS + 1):
                    self.assertEqual(rollout.stdout.readline().strip(), "holding %d" % v)
                    if v == STEPS:
                        break
                    m.unpublish()
                    for t, a in enumerate(tensors):
                        a[:] = values(v + 1, t, a.size)
                    m.publish(v + 1)
                _, err = rollout.communicate(timeout=60)
                self.assertEqual(rollout.returncode, 0, err)
                self.assertIn("checked every element", err)
            finally:
                if rollout.poll() is None:
                    rollout.kill()
                    rollout.wait()


if __name__ == "__main__":
    unittest.main()
