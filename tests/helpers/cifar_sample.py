"""A small set in CIFAR-10's own format (the python pickle batches
``data_batch_1..5``, ``test_batch`` and ``batches.meta`` under
``cifar-10-batches-py``), written by the tests, and the dataset that reads
it: mmpretrain's ``CIFAR10`` itself, with the release's md5 checksums
switched off (a sample cannot match them).

Configs import it with ``custom_imports=dict(imports=['mmvisattn',
'cifar_sample'])`` and use ``type='CIFAR10Sample'``.
"""
import os
import os.path as osp
import pickle

import numpy as np
from mmpretrain.datasets import CIFAR10
from mmpretrain.registry import DATASETS

CLASSES = ['airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog',
           'horse', 'ship', 'truck']


def write_cifar_sample(root: str, per_batch: int = 4, test: int = 8,
                       seed: int = 0) -> str:
    """``root/cifar-10-batches-py`` with 5 training batches of
    ``per_batch`` images and a test batch of ``test``: each class a
    distinct colour with noise, so a model can tell them apart."""
    rng = np.random.RandomState(seed)
    folder = osp.join(root, CIFAR10.base_folder)
    os.makedirs(folder, exist_ok=True)
    colours = rng.randint(0, 256, size=(10, 3))

    def batch(n, label):
        labels = [int(v) for v in rng.randint(0, 10, size=n)]
        images = np.stack([
            np.clip(colours[c][:, None, None] + rng.randint(
                -30, 30, size=(3, 32, 32)), 0, 255) for c in labels
        ]).astype(np.uint8).reshape(n, -1)  # CIFAR's (N, 3*32*32) rows
        return {'batch_label': label, 'labels': labels, 'data': images,
                'filenames': [f'{label}_{i}.png' for i in range(n)]}

    for name, _ in CIFAR10.train_list:
        with open(osp.join(folder, name), 'wb') as f:
            pickle.dump(batch(per_batch, name), f)
    with open(osp.join(folder, 'test_batch'), 'wb') as f:
        pickle.dump(batch(test, 'test_batch'), f)
    with open(osp.join(folder, 'batches.meta'), 'wb') as f:
        pickle.dump({'label_names': CLASSES, 'num_cases_per_batch':
                     per_batch, 'num_vis': 3072}, f)
    return root


@DATASETS.register_module(force=True)
class CIFAR10Sample(CIFAR10):
    """mmpretrain's CIFAR10 without the release's checksums."""
    train_list = [[name, None] for name, _ in CIFAR10.train_list]
    test_list = [[name, None] for name, _ in CIFAR10.test_list]
    meta = dict(CIFAR10.meta, md5=None)
