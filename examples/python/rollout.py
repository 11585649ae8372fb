"""rollout.py: the standalone rollout loop in Python, with a torch module: replicate the latest
version once, then generate, with update(latest) between batches, until it holds --until.

    rollout.py [--registry HOST:PORT] [--until V]

The registry comes from --registry or $TENSORHUB_REGISTRY (read by the library itself). Prints
"holding V DIGEST" for every version it takes (DIGEST: policy.digest of its weights). The
co-located example starts it (colocated.py --rollout rollout.py) once version 1 is published.

TensorHub calls this integration adds: 6 lines (the import, the Context, open,
register_module, replicate, update).
"""
import argparse
import os

import tensorhub
from policy import Policy, digest, generate


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--registry", default=None, help="host:port (default: $TENSORHUB_REGISTRY)")
    p.add_argument("--until", type=int, default=1, help="stop once holding this version")
    args = p.parse_args()

    engine = Policy(seed=os.getpid()).eval()  # the engine's own copy; its initial weights do not matter
    with tensorhub.Context(registry=args.registry) as ctx:
        m = ctx.open("policy", "rollout-%d" % os.getpid())
        m.register_module(engine)  # every parameter and buffer, by state-dict name, in place
        held = m.replicate()  # the latest version
        print("holding %d %s" % (held, digest(engine)), flush=True)
        batches = 0
        while held < args.until:
            generate(engine, seed=batches)  # a batch with the weights held
            batches += 1
            got = m.update()  # the latest version, or None: nothing newer yet
            if got is not None:
                held = got
                print("holding %d %s" % (held, digest(engine)), flush=True)


if __name__ == "__main__":
    main()
