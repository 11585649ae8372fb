"""colocated.py: the co-located loop in Python, with a torch module. The trainer and the
rollout engine share this process (as they share the GPUs of a co-located job), each with its
own copy of the weights; every step is publish -> generate -> unpublish -> train.

    colocated.py [--steps N] [--rollout ROLLOUT_PY]

With --rollout it also starts a standalone rollout (e.g. rollout.py) on the registry of this
process, and before each unpublish waits for that rollout's "holding V DIGEST", checking that
DIGEST is the trainer's. Exits non-zero if any copy of the weights differs from the trainer's.

TensorHub calls this integration adds: 9 lines (the import, the Context, two open and two
register_module, publish, replicate-or-update, unpublish), and one more for --rollout (the
registry's address for the rollout's environment).
"""
import argparse
import os
import subprocess
import sys

import torch

import tensorhub
from policy import Policy, digest, generate, train


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--rollout", help="a standalone rollout program to start (e.g. rollout.py)")
    args = p.parse_args()

    policy = Policy(seed=1)  # the trainer's weights
    engine = Policy(seed=2).eval()  # the co-located engine's copy
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.2)
    rollout = None
    with tensorhub.Context() as ctx:  # an embedded registry
        trainer = ctx.open("policy", "trainer")
        trainer.register_module(policy)
        colocated = ctx.open("policy", "colocated-engine")
        colocated.register_module(engine)
        for version in range(1, args.steps + 1):
            trainer.publish(version)
            got = colocated.replicate() if version == 1 else colocated.update()
            expected = digest(policy)
            if got != version or digest(engine) != expected:
                sys.exit("colocated: the engine holds %s (%s), not version %d (%s)"
                         % (got, digest(engine), version, expected))
            samples = generate(engine, seed=version)
            if args.rollout and rollout is None:
                env = dict(os.environ, TENSORHUB_REGISTRY=ctx.registry_address)
                rollout = subprocess.Popen([sys.executable, args.rollout, "--until", str(args.steps)],
                                           env=env, stdout=subprocess.PIPE, text=True)
            if rollout:
                line = rollout.stdout.readline().split()
                if line != ["holding", str(version), expected]:
                    sys.exit("colocated: the rollout said %s, not holding %d %s" % (line, version, expected))
            trainer.unpublish()  # returns once nobody reads the trainer's weights
            loss = train(policy, optimizer, samples)
            print("version %d: engine and%s rollout hold %s; loss %.4f"
                  % (version, "" if rollout else " no", expected, loss), flush=True)
        if rollout and rollout.wait() != 0:
            sys.exit("colocated: the rollout failed")
    print("colocated: %d versions, every copy checked" % args.steps)


if __name__ == "__main__":
    main()
