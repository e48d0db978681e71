"""The README's Python start runs as written: the registry builds the
backbone, ``init_weights`` loads a release-layout checkpoint of that name,
and the features are the four maps; its two config lines build our backbone
inside an mmdet detector."""
import os.path as osp
import re

import torch
from mmengine.config import Config

from helpers import REPO, skip_weight_init
from mmvisattn.models.backbones import SwinTransformer


def _python_start():
    with open(osp.join(REPO, 'README.md')) as f:
        text = f.read()
    section = text[text.index('## Python start'):
                   text.index('## Use in your own config')]
    return re.findall(r'```python\n(.*?)```', section, re.S)


def test_python_start_runs_as_written(tmp_path, monkeypatch):
    start, config_lines = _python_start()
    # the official release's file layout: {'model': state dict}
    release = SwinTransformer(arch='tiny')
    release.init_weights()
    torch.save({'model': release.state_dict()},
               str(tmp_path / 'swin_tiny_patch4_window7_224.pth'))
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(start, 'README.md', 'exec'), scope)
    swin, feats = scope['swin'], scope['feats']
    for key, value in release.state_dict().items():
        torch.testing.assert_close(swin.state_dict()[key], value)
    assert [f.shape[1:] for f in feats] == [(96 * 2**i, 56 // 2**i,
                                            56 // 2**i) for i in range(4)]

    from mmdet.registry import MODELS
    from mmengine.registry import DefaultScope
    cfg = Config.fromstring(
        "_base_ = 'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'\n"
        + config_lines + 'model.update(neck=dict(in_channels=[96, 192, 384,'
        ' 768]))\n', '.py')
    with skip_weight_init(), DefaultScope.overwrite_default_scope('mmdet'):
        detector = MODELS.build(cfg.model)
    assert type(detector.backbone) is SwinTransformer
