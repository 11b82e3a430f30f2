import torch

from gpurl.utils.host_reads import count_host_reads


def test_counts_each_kind_of_host_read():
    t = torch.ones(3)
    with count_host_reads() as reads:
        t.sum().item()
        t.tolist()
        t.cpu()
        t.numpy()
        bool(t[0])
        int(t[0])
        float(t[0])
        if t.any():
            pass
    assert reads.count == 8
    assert reads.by_method["__bool__"] == 2
    assert "test_host_reads.py" in reads.report()


def test_device_only_work_counts_nothing_and_patch_is_undone():
    t = torch.ones(3)
    with count_host_reads() as reads:
        torch.where(t > 0, t * 2, t).add_(1)
    assert reads.count == 0
    with count_host_reads():
        pass
    t[0].item()  # unpatched again: must not raise or count
    assert reads.count == 0
