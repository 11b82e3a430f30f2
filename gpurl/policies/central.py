"""The centralised critic's input (MAPPO): every robot's observation, seen by each robot.

On a multi-robot env a local critic (IPPO) values robot i from robot i's own
observation. A central critic (agent.critic=central, Yu et al. 2022, "The surprising
effectiveness of PPO in cooperative multi-agent games") values it from the whole
group's: for each robot i of a group of R,

    central_i = [ x_1, x_2, ..., x_R, onehot(i) ]        [R * D + R]

where x_j [D] is robot j's observation flattened: each entry under the group (in the
order of EnvInfo.obs_keys) divided by its feature scale (EnvInfo.obs_scales, as the
encoders do), object-list slots zeroed where their slot mask is False, then the slot
mask itself as 0/1. The robots' block is the same for every i; the one-hot index makes
the value per robot (V_i, learnt from robot i's reward) while the network is shared.
Entries outside the group (none on MarineNav or VMAS) would be the same for every robot
and are refused rather than guessed at.

It is an encoder like SpecEncoder (networks.py): a TensorDict in, features
[*batch, R, out_features] out, with no parameters; heads.ValueNetwork puts its MLP on
top. Only critics read it: the actor stays decentralised.
"""

from __future__ import annotations

from math import prod

import torch
from tensordict import TensorDictBase
from torch import nn

from gpurl.envs.info import EnvInfo
from gpurl.errors import ConfigError


def central_input(per_robot: torch.Tensor) -> torch.Tensor:
    """[*batch, R, D] robot features -> [*batch, R, R * D + R]: row i is every robot's
    features in robot order, then the one-hot index of robot i."""
    *batch, robots, dim = per_robot.shape
    group = per_robot.reshape(*batch, 1, robots * dim).expand(*batch, robots, robots * dim)
    identity = torch.eye(robots, dtype=per_robot.dtype, device=per_robot.device)
    return torch.cat([group, identity.expand(*batch, robots, robots)], dim=-1)


class CentralEncoder(nn.Module):
    """The group's observations for each robot (the module docstring)."""

    def __init__(self, info: EnvInfo):
        super().__init__()
        if len(info.group_shape) != 1:
            raise ConfigError(
                f"agent.critic=central needs a multi-robot env with one group dim, this env's "
                f"group is {tuple(info.group_shape)}: use agent.critic=local"
            )
        group = info.action_key[:-1]
        self.keys = list(info.obs_keys)
        outside = [k for k in self.keys if not (isinstance(k, tuple) and k[:-1] == group)]
        if outside:
            raise ConfigError(
                f"agent.critic=central reads observation entries under the robot group "
                f"{group}, this env also has {outside}: use agent.critic=local"
            )
        self.mask_keys = [info.slot_masks.get(k) for k in self.keys]
        self.ndims = [len(info.obs_shapes[k]) for k in self.keys]
        # one divisor per feature of x_j: an entry's scale repeated over its slots, 1 for
        # unscaled entries and for the slot masks
        divisor = []
        for key, mask_key in zip(self.keys, self.mask_keys, strict=True):
            shape = info.obs_shapes[key]
            scale = info.obs_scales.get(key)
            size = prod(shape)
            if scale is None:
                divisor.append(torch.ones(size))
            else:
                divisor.append(torch.tensor(scale, dtype=torch.float32).repeat(size // len(scale)))
            if mask_key is not None:
                divisor.append(torch.ones(shape[0]))
        self.divisor = nn.Buffer(torch.cat(divisor), persistent=False)
        self.robots = int(info.group_shape[0])
        self.out_features = self.robots * self.divisor.numel() + self.robots

    def robot_features(self, td: TensorDictBase) -> torch.Tensor:
        """x_j of every robot: [*batch, R, D]."""
        parts = []
        for key, mask_key, ndim in zip(self.keys, self.mask_keys, self.ndims, strict=True):
            x = td.get(key).float()
            x = x.unsqueeze(-1) if ndim == 0 else x.flatten(x.dim() - ndim)
            if mask_key is not None:
                mask = td.get(mask_key).float()
                slots = mask.shape[-1]
                x = (x.unflatten(-1, (slots, -1)) * mask.unsqueeze(-1)).flatten(-2)
                parts += [x, mask]
            else:
                parts.append(x)
        return torch.cat(parts, dim=-1) / self.divisor

    def forward(self, td: TensorDictBase) -> torch.Tensor:
        return central_input(self.robot_features(td))
