"""DQN with double-Q targets and a dueling head as options (Mnih et al. 2015; van Hasselt
et al. 2016; Wang et al. 2016)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tensordict import TensorDict

from gpurl.agents.base import (
    Agent,
    clip_and_step,
    feature_shape,
    hard_update,
    make_optimizer,
    observation_key,
    polyak_update,
    require_discrete,
    target_copy,
)
from gpurl.policies import LinearSchedule, PolicyWrapper, QNetwork, make_encoder


class DQNAgent(Agent):
    name = "dqn"

    def __init__(self, cfg, observation_spec, action_spec, device, random_frames: int = 0):
        n_actions = require_discrete(action_spec, "dqn")
        self.cfg = cfg
        self.obs_key = observation_key(observation_spec, cfg.get("obs_key"))
        shape = feature_shape(observation_spec, self.obs_key)
        encoder = make_encoder(shape, cfg.get("pixel_scale", 255.0))
        self.q = QNetwork(encoder, n_actions, cfg.hidden, cfg.dueling).to(device)
        self.q_target = target_copy(self.q)
        self.optimizer = make_optimizer(self.q.parameters(), cfg.lr)
        mask_key = "action_mask" if "action_mask" in observation_spec.keys() else None
        self.policy = PolicyWrapper(
            self.q,
            action_spec,
            obs_key=self.obs_key,
            mask_key=mask_key,
            epsilon=LinearSchedule(cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_frames),
            random_frames=random_frames,
        ).to(device)
        self.updates = 0

    def update(self, batch: TensorDict) -> TensorDict:
        cfg = self.cfg
        obs, next_obs = batch[self.obs_key], batch["next", self.obs_key]
        action = batch["action"].long()
        reward = batch["next", "reward"].squeeze(-1)
        not_done = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        with torch.no_grad():
            target_q = self.q_target(next_obs)
            if cfg.double:
                best = self.q(next_obs).argmax(-1, keepdim=True)
                next_q = target_q.gather(-1, best).squeeze(-1)
            else:
                next_q = target_q.max(-1).values
            target = reward + cfg.gamma * not_done * next_q
        q = self.q(obs).gather(-1, action.unsqueeze(-1)).squeeze(-1)
        loss = F.smooth_l1_loss(q, target) if cfg.loss == "huber" else F.mse_loss(q, target)
        clip_and_step(self.optimizer, self.q.parameters(), loss, cfg.max_grad_norm)
        self.updates += 1
        if cfg.target_update == "hard":
            if self.updates % cfg.target_update_interval == 0:
                hard_update(self.q_target, self.q)
        else:
            polyak_update(self.q_target, self.q, cfg.tau)
        return TensorDict(loss=loss.detach(), q=q.detach().mean())
