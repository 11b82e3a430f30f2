"""MarineNav dynamics, currents, perception and the COLREGs term, on hand-built inputs."""

import math

import pytest
import torch

from gpurl.envs.marinenav import dynamics as dyn
from gpurl.envs.marinenav.currents import rankine_velocity
from gpurl.envs.marinenav.perception import (
    collisions,
    object_offsets,
    perceive,
    sample_from_table,
    vonmises_quantile_table,
)
from gpurl.envs.marinenav.reward import colregs_term, in_colregs_zone
from tests.conftest import requires_cuda


def _run(tl, tr, decisions, yaw0=0.0):
    shape = torch.as_tensor(tl).shape
    z = torch.zeros(shape)
    x, y, yaw, vx, vy, r = z, z.clone(), torch.full(shape, yaw0), z.clone(), z.clone(), z.clone()
    tl, tr = torch.as_tensor(tl, dtype=torch.float32), torch.as_tensor(tr, dtype=torch.float32)
    for _ in range(decisions):
        x, y, yaw, vx, vy, r = dyn.fossen_substeps(x, y, yaw, vx, vy, r, tl, tr, None)
    return x, y, yaw, vx, vy, r


def test_full_thrust_surge_converges_to_3_33():
    x, y, yaw, vx, vy, r = _run([1000.0], [1000.0], 120)
    # steady state of 2000 = 100 u + 150 u^2
    assert vx.item() == pytest.approx(10 / 3, abs=1e-3)
    assert vy.abs().item() < 1e-5 and r.abs().item() < 1e-6
    assert x.item() > 100  # it went North


def test_opposite_thrust_changes_turn_the_right_way():
    # from cruise thrust 500/500, equal and opposite changes: left up, right down
    rates = dyn.discrete_rates(torch.tensor([4 * 5 + 2, 2 * 5 + 4]))  # (+1000,-1000), (-1000,+1000)
    thrust = dyn.apply_thrust_change(torch.full((2, 2), 500.0), rates)
    assert thrust.tolist() == [[1000.0, 0.0], [0.0, 1000.0]]
    x, y, yaw, vx, vy, r = _run(thrust[:, 0], thrust[:, 1], 4)
    # more thrust on the left turns clockwise (to starboard: North towards East)
    assert r[0] > 0 and r[1] < 0
    assert vy[0] > 0 and vy[1] < 0  # the track bends East for the first, West for the second
    assert torch.allclose(y[0], -y[1], atol=1e-4) and torch.allclose(x[0], x[1], atol=1e-4)
    assert 0 < yaw[0] < math.pi and math.pi < yaw[1] < 2 * math.pi


def test_thrust_clips_to_limits_and_action_table():
    up = dyn.discrete_rates(torch.tensor([24]))
    down = dyn.discrete_rates(torch.tensor([12]))
    assert up.tolist() == [[1000.0, 1000.0]] and down.tolist() == [[-1000.0, -1000.0]]
    assert dyn.discrete_rates(torch.tensor([0, 7])).tolist() == [[0.0, 0.0], [-500.0, -1000.0]]
    t = torch.zeros(1, 2)
    for _ in range(5):
        t = dyn.apply_thrust_change(t, up)
    assert t.tolist() == [[1000.0, 1000.0]]
    for _ in range(5):
        t = dyn.apply_thrust_change(t, down)
    assert t.tolist() == [[-500.0, -500.0]]
    cont = dyn.continuous_rates(torch.tensor([[0.5, -2.0]]))
    assert cont.tolist() == [[500.0, -1000.0]]


def test_vortex_speed_and_direction_inside_and_outside_core():
    centres = torch.zeros(1, 1, 2)
    gamma = torch.tensor([[2 * math.pi * 0.5 * 6.0]])  # edge speed 6 m/s
    # points North of the core at 0.25 m (inside) and 3 m (outside)
    x = torch.tensor([[0.25, 3.0]])
    y = torch.zeros(1, 2)
    vx, vy = rankine_velocity(x, y, centres, gamma)
    g = gamma.item()
    assert vy[0, 0].item() == pytest.approx(g * 0.25 / (2 * math.pi * 0.25), rel=1e-5)
    assert vy[0, 1].item() == pytest.approx(g / (2 * math.pi * 3.0), rel=1e-5)
    assert vx.abs().max().item() < 1e-6  # tangential: no radial part
    # the other sense of rotation flows the other way
    vx2, vy2 = rankine_velocity(x, y, centres, -gamma)
    assert torch.allclose(vy2, -vy)
    # tangential at an arbitrary point too
    px, py = torch.tensor([[1.3]]), torch.tensor([[-2.1]])
    ux, uy = rankine_velocity(px, py, centres, gamma)
    assert abs((ux * px + uy * py).item()) < 1e-5


def test_vortex_cores_add_up():
    centres = torch.tensor([[[0.0, 0.0], [5.0, 3.0], [-4.0, 6.0]]])
    gamma = torch.tensor([[10.0, -7.0, 4.0]])
    x, y = torch.tensor([[1.0, 2.5, -3.0]]), torch.tensor([[2.0, 2.9, 0.5]])
    vx, vy = rankine_velocity(x, y, centres, gamma)
    sx, sy = torch.zeros_like(x), torch.zeros_like(y)
    for c in range(3):
        cx, cy = rankine_velocity(x, y, centres[:, c : c + 1], gamma[:, c : c + 1])
        sx, sy = sx + cx, sy + cy
    assert torch.allclose(vx, sx, atol=1e-6) and torch.allclose(vy, sy, atol=1e-6)
    # an unused slot (gamma 0) adds nothing
    vx0, _ = rankine_velocity(
        x, y, torch.cat((centres, torch.ones(1, 1, 2)), 1), torch.cat((gamma, torch.zeros(1, 1)), 1)
    )
    assert torch.allclose(vx0, vx)


def _scene(device="cpu"):
    """Observer robot 0 at the origin facing East; 4 other robots and 4 obstacles."""
    x = torch.tensor([[0.0, 8.0, 0.0, -30.0, 3.0]], device=device)  # North
    y = torch.tensor([[0.0, 0.0, 12.0, 0.0, 3.0]], device=device)  # East
    vx = torch.tensor([[0.0, 1.0, 0.0, 0.0, 0.0]], device=device)
    vy = torch.tensor([[2.0, 0.0, -1.5, 0.0, 0.0]], device=device)
    visible = torch.tensor([[True, True, True, True, False]], device=device)  # 4 stopped
    obstacle = torch.tensor([[[0.0, 6.5], [-20.5, 0.0], [0.0, -21.5], [-5.0, -5.0]]], device=device)
    radius = torch.ones(1, 4, device=device)
    valid = torch.tensor([[True, True, True, True]], device=device)
    yaw = torch.full((1, 5), math.pi / 2, device=device)
    return x, y, torch.cos(yaw), torch.sin(yaw), vx, vy, visible, obstacle, radius, valid


def test_perception_nearest_by_surface_distance_range_mask_and_stopped():
    x, y, c, s, vx, vy, vis, obs, rad, valid = _scene()
    objects, mask = perceive(x, y, c, s, vx, vy, vis, dyn.ROBOT_RADIUS, obs, rad, valid, None)
    o, m = objects[0, 0], mask[0, 0]
    # candidates for robot 0: robot 1 (centre 8, surface 5.205), robot 2 (12 -> 9.205),
    # robot 3 (30: out of range), robot 4 (stopped: invisible), obstacle 0 (6.5 -> 5.5),
    # obstacle 1 (20.5 <= 20 + 1: in range, 19.5), obstacle 2 (21.5: out), obstacle 3
    # (7.07 -> 6.07)
    assert m.tolist() == [True, True, True, True, True]
    # robot 1 is North = port side when facing East: robot frame (0, -8)
    assert o[0, :2].tolist() == pytest.approx([0.0, -8.0], abs=1e-5)
    assert o[0, 4].item() == pytest.approx(dyn.ROBOT_RADIUS)
    assert o[1, :2].tolist() == pytest.approx([6.5, 0.0], abs=1e-5)  # obstacle dead ahead
    assert o[2, :2].tolist() == pytest.approx([-5.0, 5.0], abs=1e-5)  # SW: behind, starboard
    assert o[3, :2].tolist() == pytest.approx([12.0, 0.0], abs=1e-5)
    assert o[4, :2].tolist() == pytest.approx([0.0, 20.5], abs=1e-5)
    # velocities in the robot frame: robot 1 moves North (= -y), robot 2 moves West (= -x)
    assert o[0, 2:4].tolist() == pytest.approx([0.0, -1.0], abs=1e-5)
    assert o[3, 2:4].tolist() == pytest.approx([-1.5, 0.0], abs=1e-5)
    # robot 3 (far North, 30 m) sees only robot 1 (22 m: no) ... only the obstacle 1
    # at 9.5 m; everything else is out of range, so its other slots are masked and zero
    m3 = mask[0, 3]
    assert m3.tolist() == [True, False, False, False, False]
    assert objects[0, 3, 1:].abs().sum().item() == 0.0
    # a stopped robot is seen by no one
    seen_r4 = (objects[0, :, :, :2] - torch.tensor([0.0, 0.0])).norm(dim=-1)
    assert mask.sum().item() > 0 and seen_r4.numel() > 0
    vis_all = vis.clone()
    vis_all[0, 4] = True
    _, mask_all = perceive(x, y, c, s, vx, vy, vis_all, dyn.ROBOT_RADIUS, obs, rad, valid, None)
    # robot 4 (3, 3) is now one of robot 0's nearest objects and pushes obstacle 1 out
    o_all, _ = perceive(x, y, c, s, vx, vy, vis_all, dyn.ROBOT_RADIUS, obs, rad, valid, None)
    assert o_all[0, 0, 0, :2].tolist() == pytest.approx([3.0, -3.0], abs=1e-5)
    assert mask_all[0, 0].all()
    # offsets computed once (the env shares them with the collision check) change nothing
    offsets = object_offsets(x, y, obs)
    o_off, m_off = perceive(
        x, y, c, s, vx, vy, vis_all, dyn.ROBOT_RADIUS, obs, rad, valid, None, offsets
    )
    assert torch.equal(o_off, o_all) and torch.equal(m_off, mask_all)


def test_collisions_from_offsets():
    x, y, c, s, vx, vy, vis, obs, rad, valid = _scene()
    # robot 4 (stopped) sits 4.2 m from robot 0: within 2 x 2.795 m, but not present,
    # so robot 0 hits nothing (robot 4's own row is for the caller to mask: it stopped)
    x[0, 4], y[0, 4] = 3.0, 3.0
    hit = collisions(*object_offsets(x, y, obs), vis, rad, valid, dyn.ROBOT_RADIUS)
    assert hit.tolist() == [[False, False, False, False, True]]
    vis[0, 4] = True
    hit = collisions(*object_offsets(x, y, obs), vis, rad, valid, dyn.ROBOT_RADIUS)
    assert hit.tolist() == [[True, False, False, False, True]]
    # an obstacle 3.7 m from robot 1's centre: within 1 + 2.795 m
    obs[0, 3] = torch.tensor([8.0, 3.7])
    hit = collisions(*object_offsets(x, y, obs), vis, rad, valid, dyn.ROBOT_RADIUS)
    assert hit.tolist() == [[True, True, False, False, True]]
    valid[0, 3] = False  # an empty obstacle slot collides with nothing
    hit = collisions(*object_offsets(x, y, obs), vis, rad, valid, dyn.ROBOT_RADIUS)
    assert hit.tolist() == [[True, False, False, False, True]]


def test_perception_noise_model():
    table = vonmises_quantile_table()
    ang = sample_from_table(table, (200_000,), torch.Generator().manual_seed(0))
    assert ang.min() >= -math.pi and ang.max() <= math.pi
    assert abs(ang.mean().item()) < 0.02
    # E[cos] for VonMises(0, 1) is I1(1) / I0(1) = 0.4464
    assert torch.cos(ang).mean().item() == pytest.approx(0.4464, abs=0.01)
    # the table indices (four 16-bit lanes per random word) are uniform in every lane
    ramp = torch.arange(65536, dtype=torch.float32)
    idx = sample_from_table(ramp, (4, 50_000), torch.Generator().manual_seed(2))
    lanes = idx.reshape(-1, 4) / 65535.0
    assert lanes.mean(0).tolist() == pytest.approx([0.5] * 4, abs=0.01)
    assert lanes.var(0).tolist() == pytest.approx([1 / 12] * 4, abs=0.005)
    x, y, c, s, vx, vy, vis, obs, rad, valid = _scene()
    n = 5 + 4
    gen = torch.Generator().manual_seed(1)
    noise = {
        "pos": torch.randn((2, n, 1, 5), generator=gen),
        "vel": torch.randn((2, 5, 1, 5), generator=gen),
        "ang": sample_from_table(table, (n, 1, 5), gen),
    }
    objects, mask = perceive(x, y, c, s, vx, vy, vis, dyn.ROBOT_RADIUS, obs, rad, valid, noise)
    r_hat = objects[..., 4][mask]
    obstacle_like = r_hat[r_hat < 1.5]
    assert obstacle_like.numel() > 0
    assert ((obstacle_like >= 0.6) & (obstacle_like <= 1.0)).all()
    clean, _ = perceive(x, y, c, s, vx, vy, vis, dyn.ROBOT_RADIUS, obs, rad, valid, None)
    # each noisy position lies within a few sd of a true one (the order may change: the
    # sort key uses the noisy radius), and none is exact
    gap = torch.cdist(objects[0, 0, :, :2], clean[0, 0, :, :2]).amin(-1)
    assert (gap < 0.3).all() and (gap > 0).all()


def _colregs(objects, ego_v):
    objects = torch.tensor(objects, dtype=torch.float32).reshape(1, 1, -1, 5)
    mask = torch.ones(objects.shape[:-1], dtype=torch.bool)
    ego = torch.tensor(ego_v, dtype=torch.float32).reshape(1, 1, 2)
    return colregs_term(objects, mask, ego[..., 0], ego[..., 1], dyn.ROBOT_RADIUS).item()


def _expected_phi(px, py, r_hat, ego_angle=0.0):
    b, d = r_hat + 1.0, math.hypot(px, py)
    t = math.sqrt(d * d - b * b)
    desired = math.atan2(py, px) + math.asin(b / d) + math.atan2(dyn.ROBOT_RADIUS, t)
    phi = desired - ego_angle
    return (phi + math.pi) % (2 * math.pi) - math.pi


def test_colregs_head_on():
    # ego moving forward at 2 m/s; the other vessel 10 m ahead, slightly to port,
    # coming straight at it
    obj = [10.0, -1.0, -2.0, 0.0, 2.5]
    term = _colregs([obj], [2.0, 0.0])
    phi = _expected_phi(10.0, -1.0, 2.5)
    assert phi > 0
    assert term == pytest.approx(-0.1 * phi, abs=1e-5)


def test_colregs_crossing_and_cut_out():
    # the other vessel ahead to starboard, crossing from right to left: the ego gives way
    obj = [5.0, 8.0, 0.0, -2.0, 2.5]
    term = _colregs([obj], [2.0, 0.0])
    assert term == pytest.approx(-0.1 * _expected_phi(5.0, 8.0, 2.5), abs=1e-5)
    assert term < 0
    # zone checks in the other's frame; heading (hx, hy) = (0, 1) is 90 degrees
    one, zero = torch.tensor(1.0), torch.tensor(0.0)

    def crossing(ex, ey):
        return in_colregs_zone(torch.tensor(ex), torch.tensor(ey), zero, one)[1].item()

    assert crossing(8.0, -5.0) and crossing(-8.0, -16.0) and crossing(11.0, -10.0)
    # inside the cut-out triangle (0, 0), (12, 0), (12, -7): excluded
    assert not crossing(11.0, -2.0) and not crossing(6.0, -1.0)
    # just below its hypotenuse: included
    assert crossing(6.0, -3.6)
    # outside the box
    assert not crossing(13.0, -10.0) and not crossing(0.0, -18.0) and not crossing(0.0, 1.0)


def test_colregs_zero_when_rule_does_not_apply():
    # the other vessel barely moves
    assert _colregs([[10.0, -1.0, -0.3, 0.0, 2.5]], [2.0, 0.0]) == 0.0
    # the ego barely moves
    assert _colregs([[10.0, -1.0, -2.0, 0.0, 2.5]], [0.3, 0.0]) == 0.0
    # the other vessel moves away ahead (overtaking, not a head-on encounter)
    assert _colregs([[10.0, 0.0, 2.0, 0.0, 2.5]], [2.0, 0.0]) == 0.0
    # crossing from left to right: the other gives way, not the ego
    assert _colregs([[5.0, -8.0, 0.0, 2.0, 2.5]], [2.0, 0.0]) == 0.0
    # a head-on encounter far to starboard needs a left turn: phi <= 0, no term
    phi = _expected_phi(12.0, 4.0, 0.5)
    assert phi <= 0 or _colregs([[12.0, 4.0, -2.0, 0.0, 0.5]], [2.0, 0.0]) < 0
    assert _colregs([[16.0, 4.4, -2.0, 0.0, 0.5]], [2.0, 0.0]) <= 0.0
    # masked objects never count
    objects = torch.tensor([[10.0, -1.0, -2.0, 0.0, 2.5]]).reshape(1, 1, 1, 5)
    zero_mask = torch.zeros(1, 1, 1, dtype=torch.bool)
    ego = torch.tensor([[2.0]]), torch.tensor([[0.0]])
    assert colregs_term(objects, zero_mask, *ego, dyn.ROBOT_RADIUS).item() == 0.0


@requires_cuda
def test_dynamics_and_perception_agree_on_cpu_and_cuda():
    gen = torch.Generator().manual_seed(0)
    args = [torch.rand(64, 5, generator=gen) * 10 for _ in range(6)]
    thrust = [torch.rand(64, 5, generator=gen) * 1500 - 500 for _ in range(2)]
    cpu = dyn.fossen_substeps(*args, *thrust, None)
    gpu = dyn.fossen_substeps(*[a.cuda() for a in args], *[t.cuda() for t in thrust], None)
    for a, b in zip(cpu, gpu, strict=True):
        assert torch.allclose(a, b.cpu(), atol=1e-4, rtol=1e-4)
    scene = _scene()
    o_cpu, m_cpu = perceive(*scene[:7], dyn.ROBOT_RADIUS, *scene[7:], None)
    scene_gpu = _scene("cuda")
    o_gpu, m_gpu = perceive(*scene_gpu[:7], dyn.ROBOT_RADIUS, *scene_gpu[7:], None)
    assert torch.equal(m_cpu, m_gpu.cpu())
    assert torch.allclose(o_cpu, o_gpu.cpu(), atol=1e-5)


@pytest.mark.parametrize("cores", [0, 3])
def test_elementwise_substeps_are_the_stacked_ones(cores):
    # compile.env integrates with the elementwise form (Inductor fuses it into one loop);
    # eager runs the stacked in-place form: the same equations, to float rounding
    g = torch.Generator().manual_seed(0)
    scales = (50, 50, 3, 2, 2, 0.5, 500, 500)
    args = [torch.randn(16, 5, generator=g) * s for s in scales]
    current = None
    if cores:
        centres = torch.rand(16, cores, 2, generator=g) * 50
        gamma = torch.randn(16, cores, generator=g) * 5
        current = lambda x, y: rankine_velocity(x, y, centres, gamma)  # noqa: E731
    stacked = dyn.fossen_substeps(*args, current)
    elementwise = dyn._fossen_elementwise(*args, current, dyn.SUBSTEPS, dyn.DT)
    for a, b in zip(stacked, elementwise, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-4)
