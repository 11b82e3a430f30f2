from gpurl.policies.exploration import LinearSchedule
from gpurl.policies.heads import Critic, DeterministicActor, QNetwork, TanhGaussianActor
from gpurl.policies.networks import CNNEncoder, FlatEncoder, make_encoder, mlp
from gpurl.policies.wrapper import PolicyWrapper

__all__ = [
    "CNNEncoder",
    "Critic",
    "DeterministicActor",
    "FlatEncoder",
    "LinearSchedule",
    "PolicyWrapper",
    "QNetwork",
    "TanhGaussianActor",
    "make_encoder",
    "mlp",
]
