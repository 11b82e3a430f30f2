from gpurl.policies.central import CentralEncoder, central_input
from gpurl.policies.exploration import (
    EpsilonGreedy,
    Exploration,
    GaussianNoise,
    LinearSchedule,
    OUNoise,
    make_exploration,
)
from gpurl.policies.heads import (
    CategoricalActor,
    ClippedGaussianActor,
    Critic,
    DeterministicActor,
    QNetwork,
    TanhGaussianActor,
    ValueNetwork,
)
from gpurl.policies.networks import (
    CNNEncoder,
    SharedFeatures,
    SpecEncoder,
    make_encoder,
    mlp,
    with_features,
)
from gpurl.policies.noisy import NoisyLinear, resample_noise
from gpurl.policies.wrapper import LOG_PROB, VALUE, ActingPolicy, PolicyWrapper

__all__ = [
    "ActingPolicy",
    "Exploration",
    "CNNEncoder",
    "CentralEncoder",
    "CategoricalActor",
    "ClippedGaussianActor",
    "Critic",
    "DeterministicActor",
    "EpsilonGreedy",
    "GaussianNoise",
    "LOG_PROB",
    "LinearSchedule",
    "NoisyLinear",
    "OUNoise",
    "PolicyWrapper",
    "QNetwork",
    "SharedFeatures",
    "SpecEncoder",
    "TanhGaussianActor",
    "VALUE",
    "ValueNetwork",
    "central_input",
    "make_encoder",
    "make_exploration",
    "mlp",
    "resample_noise",
    "with_features",
]
