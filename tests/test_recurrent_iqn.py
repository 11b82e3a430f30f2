"""Recurrent IQN (agent=iqn agent.recurrent=lstm | gru): R2D2's sequence replay
(agents/sequence_q.py, shared with recurrent DQN) under IQN's quantile head: the loss
at every trained step by its parts. What the two share (no gradient through the burn-in,
a training run that learns and evaluates from its own state, recurrent=null leaving the
agent as it was) is tested for both in tests/test_recurrent_dqn.py; the host-read audit:
tests/test_host_reads_training.py; bitwise resume: tests/test_resume.py (EXACT_CASES);
learning: docs/results.md (masked CartPole)."""

import torch

import gpurl.agents.iqn as iqn
from gpurl.core.replay import sequence_priority
from gpurl.policies.recurrent import RECURRENT_STATE
from tests.test_recurrent_dqn import fill, small


def test_the_loss_is_the_quantile_loss_of_each_trained_step(tmp_path, monkeypatch):
    """The update's quantile Huber loss, per trained step and sequence [L, B]: its
    predictions are the online head's quantiles of the core's outputs at the actions
    taken, its targets reward + discount x the target head's quantiles of the greedy
    next action, read from the target core's state after the last summed step; the
    priorities handed back are R2D2's mix of each sequence's per-step losses."""
    torch.manual_seed(0)
    trainer = small(tmp_path, "agent.prioritized=true", "agent.priority_eta=0.5", agent="iqn")
    fill(trainer, 20)
    agent = trainer.agent
    for _ in range(50):  # a sample in which some trained step's n-step return ends
        sample = trainer.buffer.sample(trainer.progress)
        if (sample["discount"] == 0).any():
            break
    seen = {}
    loss_fn = iqn.quantile_huber_loss

    def spy(pred, target, taus, kappa):
        seen.update(pred=pred.detach(), target=target, taus=taus)
        return loss_fn(pred, target, taus, kappa)

    monkeypatch.setattr(iqn, "quantile_huber_loss", spy)
    nets = (agent.encoder, agent.core, agent.z)
    states = [{k: v.clone() for k, v in m.state_dict().items()} for m in nets]
    out = agent.update(sample, trainer.progress)
    L, B, n = 4, 8, int(agent.cfg.quantiles)
    assert seen["pred"].shape == (L, B, n) and seen["target"].shape == (L, B, 8)
    for m, state in zip(nets, states, strict=True):
        m.load_state_dict(state)  # the weights the update read
    with torch.no_grad():
        done = sample["done"].transpose(0, 1)
        outs, _ = agent.unroll_window(
            agent.encoder, agent.core, sample, sample[RECURRENT_STATE], done
        )
        z = agent.z.quantiles(outs[:L], seen["taus"])
        action = sample["action"].transpose(0, 1).long()
        want = z.gather(-1, action[..., None, None].expand(L, B, n, 1)).squeeze(-1)
    torch.testing.assert_close(seen["pred"], want)
    per_step = loss_fn(seen["pred"], seen["target"], seen["taus"], 1.0)
    torch.testing.assert_close(out["priority"], sequence_priority(per_step, 0.5))
    # a terminal last step bootstraps nothing: its target is its (n-step) reward alone
    ended = sample["discount"].transpose(0, 1) == 0
    assert ended.any() and not ended.all()
    reward = sample["reward"].transpose(0, 1)
    torch.testing.assert_close(seen["target"][ended], reward[ended].unsqueeze(-1).expand(-1, 8))
