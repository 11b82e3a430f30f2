"""MarineNav: multi-robot surface-vessel navigation (Fossen dynamics, currents, COLREGs)."""

from gpurl.envs.marinenav.env import MarineNavContinuousEnv, MarineNavEnv

__all__ = ["MarineNavEnv", "MarineNavContinuousEnv"]
