"""Hand-computed checks of n-step returns, GAE and Q(lambda) (gpurl.core.returns)."""

import math

import pytest
import torch

from gpurl.core.returns import gae, nstep_returns, q_lambda
from gpurl.utils.host_reads import count_host_reads

NAN = float("nan")


def ring(rewards, terminated=(), truncated=()):
    """One-stream ring: reward [C, 1]; terminated / done flags at the listed rows."""
    reward = torch.tensor(rewards, dtype=torch.float32).unsqueeze(1)
    term = torch.zeros_like(reward, dtype=torch.bool)
    done = torch.zeros_like(term)
    term[list(terminated), 0] = True
    done[list(terminated) + list(truncated), 0] = True
    return reward, term, done


def nstep(reward, term, done, rows, newest, n, gamma=0.5, streams=None):
    row = torch.tensor(rows)
    stream = torch.zeros_like(row) if streams is None else torch.tensor(streams)
    return nstep_returns(reward, term, done, row, stream, newest, reward.shape[0], n, gamma)


def check(result, ret, discount, last):
    got_ret, got_discount, got_last = result
    torch.testing.assert_close(got_ret, torch.tensor(ret))
    torch.testing.assert_close(got_discount, torch.tensor(discount))
    assert got_last.tolist() == last


REWARDS = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]  # row t holds reward t + 1


def test_nstep_full_window():
    # gamma 0.5, n 3, nothing ends: row 0 -> 1 + .5*2 + .25*3 = 2.75, discount .5^3,
    # bootstrap from row 2; row 2 -> 3 + .5*4 + .25*5 = 6.25, bootstrap from row 4.
    check(nstep(*ring(REWARDS), [0, 2], newest=7, n=3), [2.75, 6.25], [0.125, 0.125], [2, 4])


def test_nstep_terminated_inside_window_does_not_bootstrap():
    # Row 1 terminates. Row 0: 1 + .5*2 = 2 (k=2), discount 0, last row 1.
    # Row 1 itself: 2 (k=1), discount 0. Row 2 starts the next episode: unaffected, 6.25.
    result = nstep(*ring(REWARDS, terminated=[1]), [0, 1, 2], newest=7, n=3)
    check(result, [2.0, 2.0, 6.25], [0.0, 0.0, 0.125], [1, 1, 4])


def test_nstep_truncated_inside_window_bootstraps_from_truncated_row():
    # Row 1 is truncated (done, not terminated): same sums as above, but the episode
    # went on, so the discount is .5^k and the bootstrap row is the truncated row 1.
    result = nstep(*ring(REWARDS, truncated=[1]), [0, 1], newest=7, n=3)
    check(result, [2.0, 2.0], [0.25, 0.5], [1, 1])


def test_nstep_stops_at_newest_row():
    # Only rows 0..4 written (newest 4); rows 5..7 hold NaN (unwritten storage) and must
    # not leak in. Row 3: 4 + .5*5 = 6.5 (k=2, .25, last 4); row 4: 5 (k=1, .5, last 4);
    # row 0: full window 2.75.
    rewards = REWARDS[:5] + [NAN] * 3
    result = nstep(*ring(rewards), [3, 4, 0], newest=4, n=3)
    check(result, [6.5, 5.0, 2.75], [0.25, 0.5, 0.125], [4, 4, 2])


def test_nstep_wraps_around_the_ring():
    # Capacity 4 after 6 steps: time t sits in row t % 4 with reward 10 + t, so the rows
    # hold t = 4, 5, 2, 3 and the newest row is 1. gamma .5, n 3:
    #   row 3 (t=3): 13 + .5*14 + .25*15 = 23.75, crosses the wrap, last row 1
    #   row 2 (t=2, oldest): 12 + .5*13 + .25*14 = 22, last row 0
    #   row 0 (t=4): only t=5 follows: 14 + .5*15 = 21.5, discount .25, last row 1
    #   row 1 (t=5, newest): 15, discount .5; must not wrap on into the old row 2
    reward, term, done = ring([14.0, 15.0, 12.0, 13.0])
    expected = ([23.75, 22.0, 21.5, 15.0], [0.125, 0.125, 0.25, 0.5], [1, 0, 1, 1])
    check(nstep(reward, term, done, [3, 2, 0, 1], newest=1, n=3), *expected)
    # The storage's cursor may be a device tensor rather than a host int.
    check(nstep(reward, term, done, [3, 2, 0, 1], newest=torch.tensor(1), n=3), *expected)


def test_nstep_never_mixes_streams():
    # Two streams, capacity 4, newest 3: stream 0 earns 1 per step and terminates at
    # row 1, stream 1 earns 100 per step and never ends. gamma .5, n 3:
    #   (row 0, stream 0): 1 + .5*1 = 1.5, discount 0, last 1
    #   (row 0, stream 1): 100 + 50 + 25 = 175, discount .125, last 2
    #   (row 1, stream 1): 175, last 3
    #   (row 2, stream 0): 1 + .5*1 = 1.5 (newest row 3 ends the data), discount .25
    reward = torch.tensor([[1.0, 100.0]] * 4)
    term = torch.zeros(4, 2, dtype=torch.bool)
    term[1, 0] = True
    result = nstep(reward, term, term.clone(), [0, 0, 1, 2], 3, 3, streams=[0, 1, 1, 0])
    check(result, [1.5, 175.0, 175.0, 1.5], [0.0, 0.125, 0.125, 0.25], [1, 2, 3, 3])


def test_nstep_one_step_is_the_one_step_target():
    g = torch.Generator().manual_seed(0)
    capacity, streams, gamma = 16, 3, 0.9
    reward = torch.randn(capacity, streams, generator=g)
    term = torch.rand(capacity, streams, generator=g) < 0.3
    done = term | (torch.rand(capacity, streams, generator=g) < 0.3)
    row = torch.randint(capacity, (50,), generator=g)
    stream = torch.randint(streams, (50,), generator=g)
    ret, discount, last = nstep_returns(
        reward, term, done, row, stream, 7, capacity, n=1, gamma=gamma
    )
    torch.testing.assert_close(ret, reward[row, stream])
    torch.testing.assert_close(discount, gamma * (~term[row, stream]).float())
    assert torch.equal(last, row)


def reference_nstep(reward, term, done, row, stream, newest, capacity, n, gamma):
    """One sample at a time, in plain Python: the definition the tensor code follows."""
    ret, discount, last = [], [], []
    for i, (r, s) in enumerate(zip(row.tolist(), stream.tolist(), strict=True)):
        g = gamma if isinstance(gamma, float) else float(gamma[i])
        total, k, at = 0.0, 0, r
        for j in range(n):
            at = (r + j) % capacity
            if j > (newest - r) % capacity:  # not written yet, or older data of the ring
                at = (r + j - 1) % capacity
                break
            total += g**j * float(reward[at, s])
            k = j + 1
            if done[at, s]:
                break
        ret.append(total)
        discount.append(0.0 if term[at, s] else g**k)
        last.append(at)
    return torch.tensor(ret), torch.tensor(discount), last


@pytest.mark.parametrize("per_sample_gamma", [False, True])
def test_nstep_matches_a_per_sample_loop_on_random_rings(per_sample_gamma):
    g = torch.Generator().manual_seed(1)
    for _ in range(40):
        capacity, streams = int(torch.randint(4, 30, (), generator=g)), 3
        n = int(torch.randint(2, 6, (), generator=g))
        reward = torch.randn(capacity, streams, generator=g)
        done = torch.rand(capacity, streams, generator=g) < 0.3
        term = done & (torch.rand(capacity, streams, generator=g) < 0.5)
        newest = int(torch.randint(capacity, (), generator=g))
        reward[(newest + 1) % capacity] = NAN  # unwritten rows may hold anything
        row = torch.randint(capacity, (32,), generator=g)
        row = torch.where(row == (newest + 1) % capacity, newest, row)  # samples are written
        stream = torch.randint(streams, (32,), generator=g)
        gamma = torch.rand(32, generator=g) * 0.5 + 0.5 if per_sample_gamma else 0.9
        got = nstep_returns(reward, term, done, row, stream, newest, capacity, n, gamma)
        ret, discount, last = reference_nstep(
            reward, term, done, row, stream, newest, capacity, n, gamma
        )
        torch.testing.assert_close(got[0], ret)
        torch.testing.assert_close(got[1], discount)
        assert got[2].tolist() == last


def test_nstep_makes_no_host_reads():
    reward, term, done = ring(REWARDS, terminated=[3], truncated=[5])
    row, stream = torch.arange(8), torch.zeros(8, dtype=torch.long)
    with count_host_reads() as reads:
        nstep_returns(reward, term, done, row, stream, torch.tensor(6), 8, 3, 0.99)
    assert reads.count == 0, reads.report()


# GAE, gamma 0.5, lam 0.5 (gamma * lam = .25), one stream of 4 steps:
#   t=0 ordinary, t=1 terminates, t=2 is truncated (next_value 8 = value of its final
#   observation), t=3 is cut by the end of the rollout (bootstrap next_value 4).
R = [1.0, 1.0, 1.0, 1.0]
V = [2.0, 4.0, 2.0, 4.0]
NEXT_V = [4.0, math.inf, 8.0, 4.0]  # inf after the termination must not leak in
TERM = [False, True, False, False]
DONE = [False, True, True, False]


def column(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype).unsqueeze(1)


def run_gae(lam, gamma=0.5, **kw):
    return gae(
        column(R), column(V), column(NEXT_V), column(TERM, torch.bool),
        column(DONE, torch.bool), gamma, lam, **kw,
    )  # fmt: skip


def test_gae_termination_and_truncation():
    # delta = r + .5 * next_value * (1 - terminated) - value:
    #   delta0 = 1 + 2 - 2 = 1, delta1 = 1 + 0 - 4 = -3, delta2 = 1 + 4 - 2 = 3,
    #   delta3 = 1 + 2 - 4 = -1
    # A3 = -1; A2 = 3 (done cuts the trace); A1 = -3 (done); A0 = 1 + .25 * -3 = 0.25
    advantage, returns = run_gae(lam=0.5)
    torch.testing.assert_close(advantage, column([0.25, -3.0, 3.0, -1.0]))
    torch.testing.assert_close(returns, column([2.25, 1.0, 5.0, 3.0]))


def test_gae_writes_into_out():
    out = (torch.full((4, 1), NAN), torch.full((4, 1), NAN))
    advantage, returns = run_gae(lam=0.5, out=out)
    assert advantage is out[0] and returns is out[1]
    torch.testing.assert_close(returns, column([2.25, 1.0, 5.0, 3.0]))


def test_gae_lambda_one_is_discounted_return_minus_value():
    # Same sequence, lam 1: A0 = 1 + .5 * -3 = -0.5, so returns0 = 1.5 = 1 + .5 * 1,
    # the discounted return of the episode that terminates at t=1 (next_value0 = V1).
    advantage, returns = run_gae(lam=1.0)
    torch.testing.assert_close(advantage, column([-0.5, -3.0, 3.0, -1.0]))
    # Two streams, no episode end, next_value[t] = value[t+1], bootstrap 10 after t=2:
    #   G2 = 3 + .5*10 = 8, G1 = 2 + .5*8 = 6, G0 = 1 + .5*6 = 4 (stream 0);
    #   stream 1 earns twice as much and bootstraps from 20:
    #   G2 = 6 + .5*20 = 16, G1 = 4 + .5*16 = 12, G0 = 2 + .5*12 = 8.
    reward = torch.tensor([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    value = torch.tensor([[5.0, 1.0], [6.0, 2.0], [7.0, 3.0]])
    next_value = torch.cat([value[1:], torch.tensor([[10.0, 20.0]])])
    no = torch.zeros(3, 2, dtype=torch.bool)
    advantage, returns = gae(reward, value, next_value, no, no, 0.5, 1.0)
    torch.testing.assert_close(returns, torch.tensor([[4.0, 8.0], [6.0, 12.0], [8.0, 16.0]]))
    torch.testing.assert_close(advantage, returns - value)


def test_gae_lambda_zero_is_td_error():
    g = torch.Generator().manual_seed(0)
    shape = (6, 5)
    reward, value, next_value = (torch.randn(shape, generator=g) for _ in range(3))
    term = torch.rand(shape, generator=g) < 0.3
    done = term | (torch.rand(shape, generator=g) < 0.3)
    advantage, returns = gae(reward, value, next_value, term, done, 0.9, 0.0)
    td = reward + 0.9 * next_value * (~term) - value
    torch.testing.assert_close(advantage, td)
    torch.testing.assert_close(returns, td + value)


@pytest.mark.parametrize("lam", [0.0, 0.95])
def test_gae_makes_no_host_reads(lam):
    shape = (8, 4)
    term = torch.zeros(shape, dtype=torch.bool)
    with count_host_reads() as reads:
        gae(torch.ones(shape), torch.ones(shape), torch.ones(shape), term, term, 0.99, lam)
    assert reads.count == 0, reads.report()


# Q(lambda), gamma 0.5, lam 0.5, on the GAE sequence above (NEXT_V is max_a Q(s_{t+1}, a)).
def run_q_lambda(lam, gamma=0.5, **kw):
    return q_lambda(
        column(R), column(NEXT_V), column(TERM, torch.bool), column(DONE, torch.bool),
        gamma, lam, **kw,
    )  # fmt: skip


def test_q_lambda_termination_and_truncation():
    # G3 = 1 + .5 * 4 = 3 (the rollout ends: bootstrap from max Q alone)
    # G2 = 1 + .5 * 8 = 5 (truncated: bootstraps from the final observation, trace cut)
    # G1 = 1 (terminated: neither the inf bootstrap nor G2 leaks in)
    # G0 = 1 + .5 * (.5 * 4 + .5 * G1) = 1 + .5 * 2.5 = 2.25
    torch.testing.assert_close(run_q_lambda(lam=0.5), column([2.25, 1.0, 5.0, 3.0]))
    # lam 0: one-step targets r + gamma (1 - terminated) max Q'
    torch.testing.assert_close(run_q_lambda(lam=0.0), column([3.0, 1.0, 5.0, 3.0]))
    # lam 1: G0 = 1 + .5 * G1 = 1.5, the return of the episode ending at t=1
    torch.testing.assert_close(run_q_lambda(lam=1.0), column([1.5, 1.0, 5.0, 3.0]))


def test_q_lambda_mixes_max_q_and_the_next_return_along_the_trace():
    # No episode end, two streams; max Q' is not the next row's return, so every step
    # mixes both. gamma .5, lam .5, stream 0: r = 1, 2, 3, max Q' = 10, 20, 40:
    #   G2 = 3 + .5 * 40 = 23
    #   G1 = 2 + .5 * (.5 * 20 + .5 * 23) = 12.75
    #   G0 = 1 + .5 * (.5 * 10 + .5 * 12.75) = 6.6875
    # stream 1 terminates at t=1 and starts again at t=2: r = 1, 1, 1, max Q' = 2, inf, 6:
    #   G2 = 1 + .5 * 6 = 4, G1 = 1, G0 = 1 + .5 * (.5 * 2 + .5 * 1) = 1.75
    reward = torch.tensor([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]])
    next_q = torch.tensor([[10.0, 2.0], [20.0, math.inf], [40.0, 6.0]])
    term = torch.tensor([[False, False], [False, True], [False, False]])
    out = torch.full((3, 2), NAN)
    got = q_lambda(reward, next_q, term, term.clone(), 0.5, 0.5, out=out)
    assert got is out
    torch.testing.assert_close(got, torch.tensor([[6.6875, 1.75], [12.75, 1.0], [23.0, 4.0]]))


def test_q_lambda_is_the_gae_return_of_v_equal_max_q():
    # When the next row's value is the bootstrap value (same observation, same network),
    # GAE's returns with V = max Q are the Q(lambda) returns.
    g = torch.Generator().manual_seed(0)
    shape = (7, 5)
    reward, value = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    term = torch.rand(shape, generator=g) < 0.2
    done = term | (torch.rand(shape, generator=g) < 0.2)
    next_value = torch.cat([value[1:], torch.randn(1, 5, generator=g)])
    next_value = torch.where(done & ~term, torch.randn(shape, generator=g), next_value)
    _, returns = gae(reward, value, next_value, term, done, 0.9, 0.8)
    torch.testing.assert_close(q_lambda(reward, next_value, term, done, 0.9, 0.8), returns)


def test_q_lambda_makes_no_host_reads():
    shape = (8, 4)
    term = torch.zeros(shape, dtype=torch.bool)
    with count_host_reads() as reads:
        q_lambda(torch.ones(shape), torch.ones(shape), term, term, 0.99, 0.65)
    assert reads.count == 0, reads.report()
