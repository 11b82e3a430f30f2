"""EnvInfo: everything an agent is built from, read off an env's specs.

Agents never look at env classes (docs/concepts.md): they get an EnvInfo, which names

- the observation entries the networks read (one or several, root or nested such as
  ("agents", "self_state")) with their feature shapes, and the mask entries that go
  with them: an object list's slot mask ("objects" + "objects_mask"), the action mask
  ("action_mask"), and the validity mask of a group slot (MarineNav's
  ("agents", "running"): a stopped robot contributes no transition);
- the action key and its spec (discrete: n_actions; continuous: bounds);
- the reward / terminated / truncated / done keys the agent learns from: per robot
  ("agents", "reward") when the env has a group, the root entries otherwise;
- the env batch shape and the group shape (robots), so a replay can flatten
  (env, robot) slots into independent streams;
- the typical scale of each observation feature and a model the policy may call
  (packing's geometry), from the env's declared hooks (envs/hooks.py).

Conventions read from the specs: an entry named "info" (or under it) is diagnostics,
never a network input; "<name>_mask" is the slot mask of entry "<name>"; "action_mask"
is the action mask; an env declares its validity key with its `valid_key` hook.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torchrl.data import Bounded, Categorical, Composite, MultiCategorical, OneHot

from gpurl.core.keys import NestedKey, leaf, normalize, sibling
from gpurl.envs.foreign import as_gpurl_env
from gpurl.errors import ConfigError

ACTION_MASK = "action_mask"


@dataclass(frozen=True)
class EnvInfo:
    """What an agent is built from, read off an env's specs and hooks by `env_info`.

    Shapes: `batch_shape` is the env batch [B]; `group_shape` the group of members
    ([R] robots under "agents", empty for a single-agent env); `obs_shapes[key]` the
    feature shape of an observation entry after the batch and group dims (a vector
    [d], an object list [K, D], an image [C, H, W]). The reward / terminated /
    truncated / done keys are the ones to learn from: per member [B, R, 1] for an env
    with a group, the root [B, 1] otherwise.
    """

    obs_keys: tuple[NestedKey, ...]
    obs_shapes: dict[NestedKey, torch.Size]
    obs_specs: dict[NestedKey, Any]
    action_key: NestedKey
    action_spec: Any
    reward_key: NestedKey
    terminated_key: NestedKey
    truncated_key: NestedKey
    done_key: NestedKey
    batch_shape: torch.Size
    group_shape: torch.Size = torch.Size()
    valid_key: NestedKey | None = None
    action_mask_key: NestedKey | None = None
    slot_masks: dict[NestedKey, NestedKey] = field(default_factory=dict)
    # Typical magnitude of each feature of an entry (the env's `observation_scales`):
    # encoders divide by it, so raw physical units (MarineNav's 1000 N thrusts beside
    # 1 m/s speeds) reach the first layer at unit scale.
    obs_scales: dict[NestedKey, tuple[float, ...]] = field(default_factory=dict)
    device: torch.device = torch.device("cpu")
    model: Any = None

    # -- the action space ----------------------------------------------------------------
    @property
    def discrete(self) -> bool:
        return isinstance(self.action_spec, Categorical)

    @property
    def n_actions(self) -> int:
        return int(self.action_spec.space.n)

    @property
    def action_dim(self) -> int:
        return int(self.action_spec.shape[-1])

    @property
    def action_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Low and high per action dimension, [action_dim] float each."""
        d = self.action_dim
        low = self.action_spec.space.low.reshape(-1, d)[0].float()
        high = self.action_spec.space.high.reshape(-1, d)[0].float()
        return low, high

    @property
    def multi_agent(self) -> bool:
        return len(self.group_shape) > 0

    @property
    def slot_shape(self) -> torch.Size:
        """Batch dims of one transition stream: the env batch and the group."""
        return self.batch_shape + self.group_shape

    @property
    def input_keys(self) -> list[NestedKey]:
        """Every entry a policy reads: observations, their slot masks, the action mask."""
        keys = list(self.obs_keys) + list(self.slot_masks.values())
        return keys + ([self.action_mask_key] if self.action_mask_key else [])

    def action_kind(self) -> str:
        """ "discrete" or "continuous", for messages."""
        return "discrete" if self.discrete else "continuous"


def env_info(env) -> EnvInfo:
    """Read an env's specs and declared hooks (native, or any TorchRL env through
    envs/foreign.as_gpurl_env) into an EnvInfo."""
    env = as_gpurl_env(env)
    batch = torch.Size(env.batch_size)
    action_keys = [normalize(k) for k in env.action_keys]
    if len(action_keys) != 1:
        raise ConfigError(f"gpurl agents act on one action entry, this env has {action_keys}")
    action_key = action_keys[0]
    action_spec = env.full_action_spec[action_key]
    if isinstance(action_spec, OneHot):
        raise ConfigError("one-hot action specs are not supported: use integer (Categorical)")
    group = action_key[:-1] if isinstance(action_key, tuple) else ()
    group_shape = action_spec.shape[len(batch) : len(batch) + len(group)]

    def learn_key(name: str) -> NestedKey:
        nested = (*group, name)
        keys = {normalize(k) for k in env.full_reward_spec.keys(True, True)} | {
            normalize(k) for k in env.full_done_spec.keys(True, True)
        }
        return nested if group and nested in keys else name

    valid_key = env.valid_key
    obs_spec: Composite = env.observation_spec
    obs_keys, slot_masks, action_mask_key = [], {}, None
    leaves = [normalize(k) for k in obs_spec.keys(True, True)]
    for key in leaves:
        parts = key if isinstance(key, tuple) else (key,)
        if "info" in parts or key == valid_key:
            continue
        if leaf(key) == ACTION_MASK:
            action_mask_key = key
        elif leaf(key).endswith("_mask") and sibling(key, leaf(key)[: -len("_mask")]) in leaves:
            slot_masks[sibling(key, leaf(key)[: -len("_mask")])] = key
        else:
            obs_keys.append(key)
    if not obs_keys:
        raise ConfigError("the env has no observation entry a network could read")
    batch_dims = len(batch)
    obs_shapes, obs_specs = {}, {}
    for key in obs_keys:
        spec = obs_spec[key]
        # nested entries under the group carry the group dims too: strip both
        dims = batch_dims + (
            len(group_shape) if isinstance(key, tuple) and key[:-1] == group else 0
        )
        obs_shapes[key] = spec.shape[dims:]
        obs_specs[key] = spec
    return EnvInfo(
        obs_keys=tuple(obs_keys),
        obs_shapes=obs_shapes,
        obs_specs=obs_specs,
        action_key=action_key,
        action_spec=action_spec,
        reward_key=learn_key("reward"),
        terminated_key=learn_key("terminated"),
        truncated_key=learn_key("truncated"),
        done_key=learn_key("done"),
        batch_shape=batch,
        group_shape=torch.Size(group_shape),
        valid_key=valid_key,
        action_mask_key=action_mask_key,
        slot_masks=slot_masks,
        obs_scales={k: tuple(v) for k, v in env.observation_scales.items()},
        device=torch.device(env.device) if env.device is not None else torch.device("cpu"),
        model=env.model,
    )


def describe_action(info: EnvInfo) -> str:
    """A few words on the action space, for error messages."""
    spec = info.action_spec
    if isinstance(spec, MultiCategorical):
        return "a multi-part discrete action"
    if isinstance(spec, Categorical):
        return "discrete"
    if isinstance(spec, Bounded):
        return "continuous"
    return type(spec).__name__
