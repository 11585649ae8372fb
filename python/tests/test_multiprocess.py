"""Across two processes: a trainer subprocess publishes (trainer_process.py), this process
replicates and updates, over the registry this process hosts (ctx.registry_address)."""
import os
import subprocess
import sys
import unittest

import tensorhub
from thubtest import needs_numpy, np, words

LAYOUT = [("embed.weight", 1 << 20), ("head.weight", 3000), ("head.bias", 16)]  # 4 MiB and two tiny


@needs_numpy
class MultiprocessTest(unittest.TestCase):
    def test_trainer_process_publishes_this_process_replicates(self):
        with tensorhub.Context(timeout_ms=60000) as ctx:
            trainer = subprocess.Popen(
                [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "trainer_process.py"),
                 ctx.registry_address, "1", "2", "3"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            try:
                m = ctx.open("mp", "rollout")
                tensors = [np.zeros(count, dtype=np.uint32) for _, count in LAYOUT]
                for (name, _), a in zip(LAYOUT, tensors):
                    m.register(name, a)
                for v in (1, 2, 3):
                    self.assertEqual(trainer.stdout.readline().strip(), "published %d" % v)
                    got = m.replicate() if v == 1 else m.update()
                    self.assertEqual(got, v)
                    for t, a in enumerate(tensors):
                        np.testing.assert_array_equal(a, words(v, t, a.size), "tensor %d at %d" % (t, v))
                    self.assertIsNone(m.update())  # the trainer waits: nothing newer
                    if v < 3:
                        trainer.stdin.write("next\n")
                        trainer.stdin.flush()
                self.assertEqual(m.stat("held_version"), 3)
                self.assertEqual(m.stat("replications"), 3)
                m.close()
                trainer.stdin.write("exit\n")
                trainer.stdin.close()
                self.assertEqual(trainer.wait(timeout=60), 0)
            finally:
                if trainer.poll() is None:
                    trainer.kill()
                    trainer.wait()


if __name__ == "__main__":
    unittest.main()
