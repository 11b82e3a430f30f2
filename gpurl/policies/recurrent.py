"""A recurrent core (one LSTM or GRU layer) between an encoder and the heads, with the
hidden state the acting policy carries from step to step.

The state of one stream is one vector [S]: h for a GRU (S = H), h and c concatenated
for an LSTM (S = 2 H), so a rollout stores it as one entry, RECURRENT_STATE, [T, B, S].

Two acting states, never mixed:
- the training state [*env batch, S], a buffer of the core: the collector's policy reads
  it at each step, writes the state the step began with into the rollout and moves it
  on; `episode_end(done)` zeroes it where an episode ended (a multiply by ~done, no host
  read), and it carries over from one rollout to the next. It is non-persistent (module
  checkpoints and best.pt load at any number of envs); the trainers save it beside the
  collector's observation (Agent.acting_state).
- the evaluation state, a plain tensor sized at the first greedy call for its batch:
  greedy calls (evaluation, gpurl.eval) read and move it, zeroed at `start_evaluation()`
  (trainers/evaluation.py calls it) and where the observation carries TorchRL's
  "is_init" flag (NativeEnv.play_episodes sets it at every episode start).

Learning replays the core over whole sequences (`sequence`): from the stored state at
the first step, a step at a time, the state zeroed after every step where the episode
ended, so no gradient crosses an episode boundary (truncated backpropagation through
time over the rollout): PPO and A2C over their rollouts, recurrent DQN over replayed
sequences from the state stored at their first row (`unroll`, which also hands back the
states it passed through).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gpurl.core.runs import register_stackable
from gpurl.errors import ConfigError
from gpurl.policies.networks import FEATURES

RECURRENT_STATE = "recurrent_state"
IS_INIT = "is_init"  # TorchRL's flag of a step that begins an episode (InitTracker)
RECURRENT_KINDS = ("lstm", "gru")


class RecurrentCore(nn.Module):
    """One LSTM or GRU layer (torch.nn, batch_first=False) over features [*batch, F] ->
    [*batch, hidden], holding the training env batch's acting state (module docstring).

    `parts` > 1 makes that many independent layers of `hidden` units each on the same
    features (an actor's and a critic's, sb3-contrib's enable_critic_lstm), run as one
    layer of parts x hidden units whose hidden-to-hidden weights are masked to blocks:
    no part's state reaches another's gates, so each part is a layer of its own and
    they still step in one matmul. Part k's output is out[..., k H:(k + 1) H]."""

    def __init__(
        self, kind: str, in_features: int, hidden: int, batch_shape, device=None, parts: int = 1
    ) -> None:
        super().__init__()
        if kind not in RECURRENT_KINDS:
            raise ConfigError(f"agent.recurrent={kind} is unknown: use lstm, gru or null")
        if hidden < 1:
            raise ConfigError(f"agent.recurrent_hidden must be >= 1, got {hidden}")
        self.kind, self.parts, self.part_features = kind, int(parts), int(hidden)
        self.hidden = self.parts * self.part_features
        self.lstm = kind == "lstm"
        rnn = nn.LSTM if self.lstm else nn.GRU
        self.rnn = rnn(in_features, self.hidden, num_layers=1, batch_first=False)
        self.out_features = self.hidden
        self.state_size = 2 * self.hidden if self.lstm else self.hidden
        self.gates = (4 if self.lstm else 3) * self.hidden
        state = torch.zeros((*batch_shape, self.state_size), device=device)
        self.register_buffer("state", state, persistent=False)
        self.register_buffer("hh_mask", None, persistent=False)
        if self.parts > 1:  # unit i of a gate reads unit j's state only within its part
            part = torch.arange(self.hidden) // self.part_features
            block = (part[:, None] == part[None, :]).float()
            mask = block.repeat(self.gates // self.hidden, 1)
            self.register_buffer("hh_mask", mask.to(device), persistent=False)
            with torch.no_grad():
                bound = self.part_features**-0.5  # torch's init for a layer of one part's width
                for p in self.rnn.parameters():
                    p.uniform_(-bound, bound)
                self.rnn.weight_hh_l0.mul_(mask)  # what the mask drops stays 0: no gradient
        self.eval_state: Tensor | None = None

    @classmethod
    def for_agent(cls, cfg, encoder: nn.Module, info, parts: int = 1) -> RecurrentCore:
        """The core an agent config asks for (agent.recurrent, agent.recurrent_hidden)
        on `encoder`'s features, holding the state of `info`'s training envs; `parts`
        independent layers of agent.recurrent_hidden units each."""
        hidden = int(cfg.get("recurrent_hidden") or 128)
        streams = (*info.batch_shape, *info.group_shape)  # one state per env and robot
        core = cls(cfg.get("recurrent"), encoder.out_features, hidden, streams, parts=parts)
        return core.to(info.device)

    # -- one step and whole sequences --------------------------------------------------
    # The cell's arithmetic is written out on nn.LSTM / nn.GRU's own weights, not called
    # through the module a step at a time: a one-step module call re-checks and reshapes
    # its weights and states on every step, which made a 32-step unroll with its backward
    # three times slower on the CPU. The input projection of a whole sequence is one
    # matmul; only the hidden-to-hidden product runs per step. Acting and learning share
    # `_cell`, so a replay meets every step with the state the acting pass had, bit for
    # bit, and learns through autograd over it. (A replay with its backward written out
    # by hand, about half autograd's time on the CPU, gave the same gradients to float
    # round-off but learnt masked CartPole markedly less reliably: removed, see git.)
    def _affine(self, add: Tensor, x: Tensor, w: Tensor) -> Tensor:
        """add + x w^T for rows x [B, in] and weights w [out, in] (`add`: [B, out] or a
        bias [out]); RunRecurrentCore runs it per run."""
        return torch.addmm(add, x, w.t())

    def _project(self, x: Tensor) -> Tensor:
        """x [..., F] through the input weights and biases: [..., G x H]."""
        rnn = self.rnn
        flat = x.reshape(-1, x.shape[-1])
        if self.lstm:  # LSTM's two biases add to every gate alike
            out = self._affine(rnn.bias_ih_l0 + rnn.bias_hh_l0, flat, rnn.weight_ih_l0)
        else:  # GRU's hidden bias sits inside the reset gate's product: added in _cell
            out = self._affine(rnn.bias_ih_l0, flat, rnn.weight_ih_l0)
        return out.reshape(*x.shape[:-1], out.shape[-1])

    def _project_sequence(self, x: Tensor) -> Tensor:
        """`_project` of a time-major sequence x [T, B, F]: [T, B, G x H]."""
        return self._project(x)

    def _hh(self) -> Tensor:
        """The hidden-to-hidden weights, masked to their parts' blocks when parts > 1."""
        w = self.rnn.weight_hh_l0
        return w if self.hh_mask is None else w * self.hh_mask

    def _cell(self, xi: Tensor, state: Tensor, w_hh: Tensor | None = None) -> Tensor:
        """The next state [B, S] from projected inputs xi [B, G x H] and `state` [B, S]
        (torch.nn's LSTM gate order i, f, g, o; GRU's r, z, n); `w_hh`: self._hh(),
        passed in by a loop over steps so the mask is applied once."""
        rnn, H = self.rnn, self.hidden
        w_hh = self._hh() if w_hh is None else w_hh
        if self.lstm:
            h, c = state[..., :H], state[..., H:]
            i, f, g, o = self._affine(xi, h, w_hh).chunk(4, -1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            return torch.cat((torch.sigmoid(o) * torch.tanh(c), c), -1)
        hr, hz, hn = self._affine(rnn.bias_hh_l0, state, w_hh).chunk(3, -1)
        xr, xz, xn = xi.chunk(3, -1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return n + z * (state - n)  # (1 - z) n + z h

    def step(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        """(output [*batch, H], next state [*batch, S]) of features x [*batch, F] from
        `state` [*batch, S]."""
        batch = x.shape[:-1]
        xi = self._project(x).reshape(-1, self.gates)
        new = self._cell(xi, state.reshape(-1, self.state_size))
        return new[:, : self.hidden].reshape(*batch, self.hidden), new.reshape(
            *batch, self.state_size
        )

    def sequence(self, x: Tensor, state: Tensor, done: Tensor) -> Tensor:
        """Outputs [T, *batch, H] of features x [T, *batch, F] from `state` [*batch, S] at
        t = 0, the state zeroed after each step t where done[t] [T, *batch] (bool or 0/1)."""
        return self.unroll(x, state, done)[0]

    def unroll(self, x: Tensor, state: Tensor, done: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """`sequence`, and the states it passes through: (outputs [T, *batch, H], the state
        after each step before its reset [T, *batch, S], the state to go on from after the
        last step, zeroed where done[-1]). The state after a step, before its reset, is
        what a truncated episode's final observation is read from (recurrent DQN's
        bootstrap)."""
        T, batch = x.shape[0], x.shape[1:-1]
        xi = self._project_sequence(x).reshape(T, -1, self.gates)
        keep = (1.0 - done.to(x.dtype)).reshape(T, -1, 1)
        state = state.reshape(-1, self.state_size)
        w_hh = self._hh()
        H = self.hidden
        steps = []
        for t in range(T):
            steps.append(self._cell(xi[t], state, w_hh))
            state = steps[-1] * keep[t]
        after = torch.stack(steps)  # [T, B, S]
        return (
            after[..., :H].reshape(T, *batch, H),
            after.reshape(T, *batch, self.state_size),
            (after[-1] * keep[-1]).reshape(*batch, self.state_size),
        )

    # -- acting ------------------------------------------------------------------------
    @torch.no_grad()
    def act(
        self,
        x: Tensor,
        training: bool,
        is_init: Tensor | None = None,
        running: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """(output, the state this step began with) for features x [*batch, F], moving
        the training state (training) or the evaluation state on by one step, restarted
        where `is_init` or `running` say (`restart`)."""
        if training:
            state = self.state
            if state.shape[:-1] != x.shape[:-1]:
                raise ConfigError(
                    f"the recurrent state was sized for the training envs "
                    f"{tuple(state.shape[:-1])}, got a batch {tuple(x.shape[:-1])} while "
                    f"exploring: call a recurrent policy on other batches greedily"
                )
        else:
            state = self.evaluation_state(x)
        began = self.restart(state, is_init, running)
        out, new = self.step(x, began)
        state.copy_(new)
        return out, began

    def restart(
        self, state: Tensor, is_init: Tensor | None = None, running: Tensor | None = None
    ) -> Tensor:
        """A copy of `state` restarted from zeros where `is_init` [*env batch, 1] marks an
        episode's first step and, on a multi-robot env, where `running` [*env batch, R]
        marks a slot whose robot has stopped (or holds none): a stopped robot carries no
        memory. What a step from `state` begins with."""
        began = state.clone() if is_init is None else state * ~per_stream(is_init, state)
        return began if running is None else began * per_stream(running, began)

    def evaluation_state(self, x: Tensor) -> Tensor:
        """The greedy calls' state for x's batch, zeros when first seen at this size."""
        shape = (*x.shape[:-1], self.state_size)
        if self.eval_state is None or self.eval_state.shape != shape:
            self.eval_state = torch.zeros(shape, device=x.device)
        return self.eval_state

    def episode_end(self, done: Tensor) -> None:
        """Zero the training state where done [*env batch] is True, every robot's of an
        env that ended (no host read)."""
        self.state.mul_(~per_stream(done, self.state))

    def start_evaluation(self) -> None:
        """Fresh episodes ahead: the evaluation state restarts from zeros."""
        if self.eval_state is not None:
            self.eval_state.zero_()


class RunRecurrentCore(RecurrentCore):
    """N runs' cores as one (trainer.num_seeds, core/runs.py): weight_ih [N, G, F],
    weight_hh [N, G, H], biases [N, G], each run's rows of a run-major batch (envs
    [k E, (k + 1) E) of N x E) meeting its own weights in one batched matmul; the acting
    state [N x E(, R), S] as one core's."""

    def __init__(self, copies) -> None:
        nn.Module.__init__(self)
        first = copies[0]
        self.kind, self.parts, self.part_features = first.kind, first.parts, first.part_features
        self.hidden, self.lstm, self.out_features = first.hidden, first.lstm, first.out_features
        self.state_size, self.gates, self.runs = first.state_size, first.gates, len(copies)
        self.rnn = nn.Module()  # the weights under nn.LSTM / nn.GRU's names, stacked
        for name, _ in first.rnn.named_parameters():
            stacked = torch.stack([c.rnn.get_parameter(name).detach() for c in copies])
            self.rnn.register_parameter(name, nn.Parameter(stacked))
        self.register_buffer("state", first.state.clone(), persistent=False)
        self.register_buffer("hh_mask", first.hh_mask, persistent=False)
        self.eval_state = None

    def _affine(self, add: Tensor, x: Tensor, w: Tensor) -> Tensor:
        # rows run-major: run k's B / N rows meet w[k]; a bias [N, out] is [N, 1, out]
        n = self.runs
        out = torch.baddbmm(
            add.reshape(n, -1, add.shape[-1]), x.reshape(n, -1, x.shape[-1]), w.transpose(1, 2)
        )
        return out.reshape(x.shape[0], w.shape[1])

    def _project_sequence(self, x: Tensor) -> Tensor:
        # the batch, not time, is run-major: project [B, T, F] and turn back
        return self._project(x.transpose(0, 1)).transpose(0, 1)

    def run(self, k: int) -> RecurrentCore:
        """Run k's core, as one run would have built it (evaluation reads it)."""
        single = RecurrentCore(
            self.kind, self.rnn.weight_ih_l0.shape[-1], self.part_features,
            self.state.shape[:-1], self.state.device, self.parts,
        )  # fmt: skip
        with torch.no_grad():
            for name, p in single.rnn.named_parameters():
                p.copy_(self.rnn.get_parameter(name)[k])
        return single


register_stackable(RecurrentCore, RunRecurrentCore)


def per_stream(mask: Tensor, state: Tensor) -> Tensor:
    """A mask over the env batch (and the robots) [*env batch(, R)(, 1)] shaped to
    broadcast over the state [*env batch(, R), S]: an env's flag reaches its every
    robot's state."""
    if mask.dim() >= state.dim():  # a trailing 1 beside every stream dim: [N, R, 1]
        return mask.reshape(state.shape[:-1] + (1,))
    return mask.reshape(*mask.shape, *(1,) * (state.dim() - mask.dim()))


# -- the bootstrap of recurrent on-policy agents --------------------------------------------
def replay(encoder: nn.Module, core: RecurrentCore, batch, many: bool):
    """(batch, obs) for a minibatch of whole sequences [L, n]: obs (a shallow copy of
    batch) with the core's outputs replayed from each sequence's stored first state as
    its FEATURES. With N runs (`many`) both come back [n, L], the sequences leading:
    stacked networks find each run's rows in the leading dims (core/runs.py)."""
    if many:
        batch = batch.transpose(0, 1)
        x, done = encoder(batch).transpose(0, 1), batch.get("done").transpose(0, 1)
        out = core.sequence(x, batch.get(RECURRENT_STATE)[:, 0], done).transpose(0, 1)
    else:
        out = core.sequence(encoder(batch), batch.get(RECURRENT_STATE)[0], batch.get("done"))
    return batch, batch.clone(recurse=False).set(FEATURES, out)


def features_from(encoder: nn.Module, core: RecurrentCore, obs, state: Tensor):
    """`obs` (a shallow copy) with the core's output for it from `state` as its
    FEATURES: what the heads read for an observation acted on from that state."""
    out, _ = core.step(encoder(obs), state)
    return obs.clone(recurse=False).set(FEATURES, out)


def next_features(encoder: nn.Module, core: RecurrentCore, rollout):
    """The rollout's next observations [T, N] with their features: each step's state
    after it (before any reset), from the state the rollout stored, then one step on
    the next observation from it. Two batched core steps, no loop over T. (With N runs
    the caller passes the rollout run-major, [N x E, T], as stacked networks read it.)"""
    _, after = core.step(encoder(rollout), rollout.get(RECURRENT_STATE))
    return features_from(encoder, core, rollout.get("next"), after)
