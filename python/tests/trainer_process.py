"""The trainer of test_multiprocess: a separate process that publishes numpy tensors.

    trainer_process.py REGISTRY VERSIONS...
For each version: fill the tensors, publish, print "published V", then wait for a line on
stdin ("next") before unpublishing; after the last one, wait for "exit". The pipe is the only
synchronisation: the test reads each line before it replicates.
"""
import sys

import tensorhub
from thubtest import np, words

from test_multiprocess import LAYOUT


def main():
    registry, versions = sys.argv[1], [int(v) for v in sys.argv[2:]]
    with tensorhub.Context(registry=registry, timeout_ms=60000) as ctx:
        m = ctx.open("mp", "trainer")
        tensors = [np.zeros(count, dtype=np.uint32) for _, count in LAYOUT]
        for (name, _), a in zip(LAYOUT, tensors):
            m.register(name, a)
        for v in versions:
            for t, a in enumerate(tensors):
                a[:] = words(v, t, a.size)
            m.publish(v)
            print("published %d" % v, flush=True)
            if sys.stdin.readline().strip() != "next":
                break
            m.unpublish()
        m.close()


if __name__ == "__main__":
    main()
