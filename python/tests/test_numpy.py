"""numpy arrays within one process: a trainer and two rollout replicas (two handles each)."""
import unittest

import tensorhub
from thubtest import needs_numpy, np, words

# (name, elements): one tensor above the compaction threshold (64K), two below it.
LAYOUT = [("embed.weight", 300000), ("head.weight", 4000), ("head.bias", 16)]


def make_tensors():
    return [np.zeros(count, dtype=np.uint32) for _, count in LAYOUT]


def fill(tensors, version):
    for t, a in enumerate(tensors):
        a[:] = words(version, t, a.size)


def open_replica(ctx, replica, tensors, **info):
    m = ctx.open("policy", replica, **info)
    for (name, _), a in zip(LAYOUT, tensors):
        m.register(name, a)
    return m


@needs_numpy
class NumpyTest(unittest.TestCase):
    def setUp(self):
        self.ctx = tensorhub.Context(timeout_ms=np.int64(60000))  # any integral value
        self.addCleanup(self.ctx.close)

    def assertHolds(self, tensors, version):
        for t, a in enumerate(tensors):
            np.testing.assert_array_equal(a, words(version, t, a.size), "tensor %d at version %d" % (t, version))

    def test_publish_replicate_update_unpublish(self):
        src, dst0, dst1 = make_tensors(), make_tensors(), make_tensors()
        trainer = open_replica(self.ctx, "trainer", src)
        r0 = open_replica(self.ctx, "rollout-0", dst0)
        r1 = open_replica(self.ctx, "rollout-1", dst1)
        fill(src, 1)
        trainer.publish(1)
        self.assertEqual(r0.replicate(), 1)
        self.assertHolds(dst0, 1)
        self.assertEqual(r1.replicate(1), 1)
        self.assertHolds(dst1, 1)
        self.assertIsNone(r0.update())  # nothing newer: still holding 1
        self.assertEqual(r0.stat("held_version"), 1)

        trainer.unpublish()
        fill(src, 2)
        trainer.publish(2)
        self.assertEqual(r0.update(), 2)
        self.assertHolds(dst0, 2)
        self.assertHolds(dst1, 1)  # untouched until it updates
        # latest_minus(1): the version before the newest available one, which rollout-1 holds
        dst2 = make_tensors()
        r2 = open_replica(self.ctx, "rollout-2", dst2)
        self.assertEqual(r2.replicate(tensorhub.latest_minus(1)), 1)
        self.assertHolds(dst2, 1)
        self.assertEqual(r1.update(tensorhub.LATEST), 2)
        self.assertHolds(dst1, 2)

        stats = r0.stat()
        self.assertEqual(stats["held_version"], 2)
        self.assertEqual(stats["replications"], 2)
        self.assertEqual(stats["total_bytes"], sum(a.nbytes for a in dst0))
        self.assertEqual(trainer.stat("held_version"), 2)
        for m in (r2, r1, r0, trainer):
            m.close()

    def test_two_handles_of_one_replica_are_two_shards(self):
        # One replica split in two shards, each a handle of its own; a reader of the same shape.
        half = [np.zeros(5000, dtype=np.uint32), np.zeros(5000, dtype=np.uint32)]
        shards = [self.ctx.open("sharded", "trainer", shard=s, num_shards=2) for s in range(2)]
        readers = [self.ctx.open("sharded", "rollout", shard=s, num_shards=2) for s in range(2)]
        out = [np.zeros(5000, dtype=np.uint32), np.zeros(5000, dtype=np.uint32)]
        for s in range(2):
            half[s][:] = words(7, s, 5000)
            shards[s].register("w", half[s])
            readers[s].register("w", out[s])
            shards[s].publish(7)
        for s in range(2):
            self.assertEqual(readers[s].replicate(), 7)
            np.testing.assert_array_equal(out[s], words(7, s, 5000))

    def test_errors(self):
        src = make_tensors()
        trainer = open_replica(self.ctx, "trainer", src)
        with self.assertRaises(tensorhub.TensorHubError) as e:
            trainer.publish(-5)
        self.assertEqual(e.exception.code, tensorhub.ERR_ARG)
        fill(src, 3)
        trainer.publish(3)
        with self.assertRaises(tensorhub.TensorHubError) as e:
            trainer.publish(4)  # published already
        self.assertEqual(e.exception.code, tensorhub.ERR_STATE)
        with self.assertRaises(tensorhub.TensorHubError) as e:
            trainer.register("late", np.zeros(4, dtype=np.uint32))  # after the first publish
        self.assertEqual(e.exception.code, tensorhub.ERR_STATE)

        wrong = self.ctx.open("policy", "wrong-layout")
        wrong.register("embed.weight", np.zeros(10, dtype=np.uint32))
        with self.assertRaises(tensorhub.TensorHubError) as e:
            wrong.replicate()
        self.assertEqual(e.exception.code, tensorhub.ERR_LAYOUT)

        missing = self.ctx.open("no-such-model", "r0", retain=0)
        missing.register("w", np.zeros(4, dtype=np.uint32))
        with self.assertRaises(tensorhub.TensorHubError) as e:
            missing.replicate(12)
        self.assertEqual(e.exception.code, tensorhub.ERR_NOT_FOUND)
        self.assertIn("never published", e.exception.detail)


if __name__ == "__main__":
    unittest.main()
