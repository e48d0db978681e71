"""torch>=2.6 weights_only loading of full mmengine checkpoints, inside
``mmvisattn.runtime()`` (the scope every tool runs in)."""
import pickle

import numpy as np
import pytest
import torch
from mmengine.logging import HistoryBuffer, MessageHub

import mmvisattn
from mmvisattn.environment import _history_buffer_getattr


def test_message_hub_and_numpy_survive_weights_only(tmp_path):
    hub = MessageHub.get_instance('mmvisattn_weights_only_test')
    hub.update_scalar('train/loss', np.float64(1.5))
    hub.update_scalar('train/loss', 0.5)
    hub.update_info('seed', np.int64(3))
    path = tmp_path / 'ckpt.pth'
    torch.save({'message_hub': hub.state_dict(),
                'meta': {'scale': np.float32(2.), 'arr': np.arange(3)}}, path)
    with mmvisattn.runtime():
        loaded = torch.load(path, weights_only=True)
    buffer = loaded['message_hub']['log_scalars']['train/loss']
    assert isinstance(buffer, HistoryBuffer)
    assert buffer.current() == 0.5 and buffer.mean() == 1.0
    assert buffer.statistics('max') == 1.5
    assert loaded['meta']['arr'].tolist() == [0, 1, 2]


class _Sneaky:
    """Pickles as getattr(numpy.ndarray, 'tofile'): must be refused."""

    def __reduce__(self):
        return getattr, (np.ndarray, 'tofile')


def test_getattr_is_restricted_to_history_buffer(tmp_path):
    assert _history_buffer_getattr(HistoryBuffer, 'min') is HistoryBuffer.min
    for obj, name in ((HistoryBuffer, '__init__'), (np.ndarray, 'tofile')):
        with pytest.raises(pickle.UnpicklingError):
            _history_buffer_getattr(obj, name)
    path = tmp_path / 'sneaky.pth'
    torch.save({'x': _Sneaky()}, path)
    with mmvisattn.runtime(), \
            pytest.raises(pickle.UnpicklingError, match='not allowed'):
        torch.load(path, weights_only=True)
