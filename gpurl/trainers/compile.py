"""What the collector acts with and steps, compiled as the `compile` group asks
(core/compile.py lists the settings; agents compile their own gradient steps).

    compile.policy      the acting policy as one Inductor graph (InductorPolicy)
    compile.cudagraphs  the acting policy captured as a CUDA graph and replayed
    compile.env         the env's lean step through Inductor (gpurl.envs.compile)

Only what acts in training is compiled: evaluation runs the eager policy (the same
weights), so a greedy evaluation never replays a graph captured while exploring.
"""

from __future__ import annotations

import sys

from torch.func import functional_call

from gpurl.core.compile import CompileSpec, compile_flat
from gpurl.core.private import missing_cpp_compiler
from gpurl.envs.base import NativeEnv
from gpurl.envs.compile import compile_lean_step
from gpurl.errors import ConfigError
from gpurl.policies.wrapper import ActingPolicy, PolicyWrapper


class InductorPolicy:
    """policy(td) as one Inductor graph traced once (fixed shapes), called with no Dynamo
    guards: about one eager op of overhead per call where torch.compile's guards cost
    tens of microseconds, which is most of a small policy's time on a CPU.

    The graph is a pure function of the policy's parameters and buffers (passed at
    every call, so optimizer updates are seen), its input entries and the progress
    frame counter (PolicyWrapper.forward's `frames`); it re-traces when an input's shape
    changes. Its random draws (exploration) come from Inductor's generator, not the
    eager stream. It is traced while exploring, as the collector always acts: greedy
    evaluation keeps the eager policy.
    """

    def __init__(self, policy: PolicyWrapper, mode: str | None = None):
        self.policy, self.mode = policy, mode
        self.in_keys, self.out_keys = list(policy.in_keys), list(policy.out_keys)
        named = [*policy.named_parameters(), *policy.named_buffers()]
        self.names = [n for n, _ in named]
        self.state = [t for _, t in named]
        self.compiled: dict[tuple, object] = {}

    def _flat(self, batch_size, device):
        from tensordict import TensorDict

        policy, names, in_keys, out_keys = self.policy, self.names, self.in_keys, self.out_keys

        def flat(*args):
            n = len(names)
            td = TensorDict({}, batch_size=batch_size, device=device)
            for key, value in zip(in_keys, args[n:-1], strict=True):
                td.set(key, value)
            params = dict(zip(names, args[:n], strict=True))
            out = functional_call(policy, params, (td,), {"frames": args[-1]})
            return tuple(out.get(k) for k in out_keys)

        return flat

    def __call__(self, td):
        inputs = [td.get(k) for k in self.in_keys]
        key = tuple(x.shape for x in inputs)
        fn = self.compiled.get(key)
        if fn is None:
            args = (*self.state, *inputs, self.policy.progress.frames)
            flat = self._flat(td.batch_size, td.device)
            options = {"mode": self.mode} if self.mode else {}
            fn = self.compiled[key] = compile_flat(flat, args, "inductor", **options)
        out = fn(*self.state, *inputs, self.policy.progress.frames)
        for k, v in zip(self.out_keys, out, strict=True):
            td.set(k, v)
        return td


def compile_policy(policy: ActingPolicy, spec: CompileSpec, recurrent: bool = False):
    """What the collector acts with: `policy` itself, or compiled and/or graphed. The
    agent keeps its eager policy for evaluation (same parameters). A recurrent agent's
    acting traces through Inductor with its hidden state (the graph moves the core's
    state buffer in place, as the eager step does); under compile.cudagraphs only its
    update is captured, its acting is not."""
    acting = policy
    if spec.policy:
        if not isinstance(policy, PolicyWrapper):  # the trace feeds it progress.frames alone
            raise ConfigError(
                f"compile.policy traces PolicyWrapper policies, and this agent acts with "
                f"{type(policy).__name__}: leave it out (compile.policy=false; "
                f"compile.update still applies)"
            )
        acting = InductorPolicy(policy, spec.mode)
    if spec.cudagraphs and not recurrent:
        from tensordict.nn import CudaGraphModule

        acting = CudaGraphModule(
            acting,
            warmup=spec.warmup,
            in_keys=policy.in_keys,
            out_keys=policy.out_keys,
            device=policy.progress.frames.device,
        )
    return acting


def env_step(env, spec: CompileSpec):
    """The lean step the collector calls: a native env's own, or compiled (compile.env):
    its LeanCore through Inductor, or, for an env that compiles its own step's pure part
    (`compile_step`: MarineNav, whose resets draw from a scenario pool), that env's
    lean_step after it did. None for other envs (TorchRL's collector steps them)."""
    if not spec.env:
        return env.lean_step if env.lean_path else None
    reason = missing_cpp_compiler() if env.device.type == "cpu" else None
    if reason:  # a preset's compile.env is a speed-up only: step eagerly, and say so
        print(f"gpurl: warning: compile.env=true: {reason}; the env steps eagerly", file=sys.stderr)
        return env.lean_step if env.lean_path else None
    if isinstance(env, NativeEnv) and env.lean_core() is None and env.compile_step():
        return env.lean_step
    return compile_lean_step(env)
