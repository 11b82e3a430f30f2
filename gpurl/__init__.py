"""gpurl: a TorchRL-based, GPU-resident, modular RL training stack."""

__version__ = "0.1.0"
