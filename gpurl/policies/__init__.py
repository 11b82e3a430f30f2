from gpurl.policies.exploration import (
    EpsilonGreedy,
    GaussianNoise,
    LinearSchedule,
    OUNoise,
    make_exploration,
)
from gpurl.policies.heads import Critic, DeterministicActor, QNetwork, TanhGaussianActor
from gpurl.policies.networks import CNNEncoder, SpecEncoder, make_encoder, mlp
from gpurl.policies.wrapper import LOG_PROB, VALUE, PolicyWrapper

__all__ = [
    "CNNEncoder",
    "Critic",
    "DeterministicActor",
    "EpsilonGreedy",
    "GaussianNoise",
    "LOG_PROB",
    "LinearSchedule",
    "OUNoise",
    "PolicyWrapper",
    "QNetwork",
    "SpecEncoder",
    "TanhGaussianActor",
    "VALUE",
    "make_encoder",
    "make_exploration",
    "mlp",
]
