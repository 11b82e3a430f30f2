"""What agents, policies and trainers all use, below all of them.

    keys         nested TensorDict keys, one way
    progress     the progress record: frames, updates, episodes (device and host)
    schedules    closed-form schedules of a progress counter
    returns      n-step returns, GAE and Q(lambda) as pure tensor functions
    replay       ReplaySpec (what an agent asks of its replay) and weighted_mean
    distributed  torchrun's process group and the reductions over ranks
    compile      the compile settings and the one wrapper of a compiled step
    config       declaring a component's config keys: key(), declare(), Schema
    registry     components by name (envs, agents, encoders, loggers) and plug-ins
    private      the private torch / tensordict APIs gpurl calls, wrapped with fallbacks

Imports run one way: core imports nothing of gpurl but gpurl.errors.
"""
