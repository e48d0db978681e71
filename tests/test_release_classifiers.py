"""Released classifiers evaluate unchanged through tools/test.py with our
classification configs (``load_from`` is the same path).

Nothing can be downloaded here, so each file is built from timm's model
with random weights, written in the release's own layout:

- microsoft/Swin-Transformer: ``{'model': state}``, the official names
  (``layers.i.blocks.j``, ``layers.i.downsample`` closing stage i, ``norm``,
  ``head``) with the derived ``relative_position_index`` / ``attn_mask``;
- huawei-noah/Efficient-AI-Backbones TNT: a bare state dict in the official
  module's names (``outer_pos``, ``inner_attn``, ..., ``head``), as timm's
  pretrained loader reads the released ``.pth.tar``;
- mmpretrain's zoo Swin-T classifier: its whole ``ImageClassifier`` state
  (``backbone.stages...``, ``head.fc``), checked against mmpretrain's own
  model first;
- microsoft/Swin-Transformer's Swin V2-T (window 8, 256): ``{'model':
  state}`` in the authors' V2 names (``q_bias``, ``logit_scale``,
  ``cpb_mlp``, ``head``);
- Hugging Face's ``Swinv2ForImageClassification`` of the same weights as
  ``pytorch_model.bin`` (``swinv2.*``, ``classifier``), the layout
  tests/test_hf_layout.py checks against transformers' own model.

tools/test.py runs each with our config on 6 hymenoptera_mini images at the
config's own 224 test pipeline; the dumped scores are compared with timm's
model on the same preprocessed batches.
"""
import os.path as osp
import pickle

import pytest
import torch
from mmengine.config import Config

from helpers import REPO, run_tools, shared_dataset

timm = pytest.importorskip('timm')

CONFIGS = osp.join(REPO, 'configs')
SWIN_T = osp.join(CONFIGS, 'swin', 'swin-t-p4-w7_16xb64_300e_in1k.py')
SWINV2_T = osp.join(CONFIGS, 'swin_v2', 'swinv2-t-w8_16xb64_300e_in1k-256px.py')
TNT_S = osp.join(CONFIGS, 'tnt', 'tnt-s-p16_16xb64_300e_in1k.py')
NUM_IMAGES = 6


def hymenoptera_test_config(config, root, path):
    with open(path, 'w') as f:
        f.write(f'''
_base_ = {config!r}
test_dataloader = dict(
    batch_size=3, num_workers=0, persistent_workers=False,
    dataset=dict(_delete_=True, type='CustomDataset', data_root={root!r},
                 data_prefix='val', indices={NUM_IMAGES},
                 pipeline=_base_.test_pipeline))
test_evaluator = dict(type='Accuracy', topk=(1, ))
''')
    return path


def _perturb(model, seed):
    """Random weights everywhere, relative tables and position embeddings
    included (timm starts them at zero)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and name.endswith('weight'):
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0, 0.05 if p.dim() > 1 else 0.1)
    return model.eval()


def timm_scores(model, config):
    """timm's softmax scores on the config's test batches, preprocessed by
    the config's own data preprocessor."""
    from mmengine.registry import DefaultScope
    from mmengine.runner import Runner
    from mmpretrain.models.utils import ClsDataPreprocessor
    cfg = Config.fromfile(config)
    scores = {}
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        loader = Runner.build_dataloader(cfg.test_dataloader)
        pre = ClsDataPreprocessor(**cfg.data_preprocessor)
        with torch.no_grad():
            for batch in loader:
                data = pre(batch, False)
                out = model(data['inputs']).softmax(-1)
                for sample, score in zip(data['data_samples'], out):
                    scores[sample.img_path] = score
    assert len(scores) == NUM_IMAGES
    return scores


def official_release(name, seed, path):
    """timm's ``name`` with random weights, written to ``path`` in the
    authors' release layout; returns (timm's model, our backbone keys,
    timm's state)."""
    from mmvisattn.models.utils import swin_any_to_mmvisattn, swin_to_official
    reference = _perturb(timm.create_model(name), seed=seed)
    state = reference.state_dict()
    backbone = swin_any_to_mmvisattn(
        {k: v for k, v in state.items() if not k.startswith('head.')}, 4)
    official = swin_to_official(backbone)
    official['head.weight'] = state['head.fc.weight']
    official['head.bias'] = state['head.fc.bias']
    torch.save({'model': official}, str(path))
    return reference, backbone, state


def swin_files(tmp):
    import mmpretrain
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS

    from mmvisattn.models.utils import swin_to_mmdet
    reference, backbone, state = official_release(
        'swin_tiny_patch4_window7_224', 0, tmp / 'swin_official.pth')

    # mmpretrain's own classifier with these weights gives timm's logits
    whole = {f'backbone.{k}': v for k, v in swin_to_mmdet(backbone).items()}
    whole['head.fc.weight'] = state['head.fc.weight']
    whole['head.fc.bias'] = state['head.fc.bias']
    peer_cfg = Config.fromfile(osp.join(
        osp.dirname(mmpretrain.__file__), '.mim', 'configs',
        'swin_transformer', 'swin-tiny_16xb64_in1k.py')).model
    peer_cfg.pop('train_cfg', None)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        peer = MODELS.build(peer_cfg)
    result = peer.load_state_dict(whole, strict=False)
    assert not result.unexpected_keys and all(
        k.endswith('relative_position_index') for k in result.missing_keys)
    peer.eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(peer(x, mode='tensor'), reference(x),
                                   atol=1e-4, rtol=1e-4)
    torch.save({'state_dict': whole, 'meta': {'mmpretrain_version': '1.2.0'}},
               str(tmp / 'swin_mmpretrain.pth'))
    return reference


def swinv2_files(tmp):
    """The authors' V2-T release layout and Hugging Face's classifier."""
    from mmvisattn.models.utils import swin_to_hf
    reference, backbone, state = official_release(
        'swinv2_tiny_window8_256', 2, tmp / 'swinv2_official.pth')
    hf = {f'swinv2.{k}': v for k, v in swin_to_hf(backbone).items()}
    hf['classifier.weight'] = state['head.fc.weight']
    hf['classifier.bias'] = state['head.fc.bias']
    torch.save(hf, str(tmp / 'pytorch_model.bin'))
    return reference


def tnt_file(tmp):
    from helpers.checkpoints import tnt_official_from_timm
    reference = _perturb(timm.create_model('tnt_s_patch16_224'), seed=1)
    torch.save(tnt_official_from_timm(reference.state_dict()),
               str(tmp / 'tnt_official.pth'))
    return reference


def _scores(path):
    with open(path, 'rb') as f:
        return {r['img_path']: r['pred_score'] for r in pickle.load(f)}


@pytest.mark.slow
def test_released_classifiers_evaluate_unchanged(tmp_path):
    """The official Swin-T, Swin V2-T and TNT-S releases, mmpretrain's
    whole Swin-T classifier and Hugging Face's Swin V2-T classifier through
    tools/test.py with our configs, no conversion step: timm's scores with
    the same weights (1e-4)."""
    root = shared_dataset('hymenoptera_mini')
    swin, tnt = swin_files(tmp_path), tnt_file(tmp_path)
    swinv2 = swinv2_files(tmp_path)
    swin_cfg = hymenoptera_test_config(SWIN_T, root, str(tmp_path / 'swin.py'))
    tnt_cfg = hymenoptera_test_config(TNT_S, root, str(tmp_path / 'tnt.py'))
    swinv2_cfg = hymenoptera_test_config(SWINV2_T, root,
                                         str(tmp_path / 'swinv2.py'))
    runs = [('swin_official', swin_cfg), ('swin_mmpretrain', swin_cfg),
            ('tnt_official', tnt_cfg), ('swinv2_official', swinv2_cfg),
            ('swinv2_huggingface', swinv2_cfg)]
    files = {name: str(tmp_path / f'{name}.pth') for name, _ in runs}
    files['swinv2_huggingface'] = str(tmp_path / 'pytorch_model.bin')
    outputs = run_tools(*[
        ['tools/test.py', config, files[name], '--out',
         str(tmp_path / f'{name}.pkl'), '--work-dir', str(tmp_path / name)]
        for name, config in runs])
    for out in outputs:
        assert 'accuracy/top1' in out, out[-3000:]
        assert 'unexpected key' not in out and 'missing key' not in out, \
            out[-3000:]
    expected = {'swin': timm_scores(swin, swin_cfg),
                'tnt': timm_scores(tnt, tnt_cfg),
                'swinv2': timm_scores(swinv2, swinv2_cfg)}
    for name, _ in runs:
        got = _scores(tmp_path / f'{name}.pkl')
        want = expected[name.split('_')[0]]
        assert set(got) == set(want)
        for path, score in got.items():
            torch.testing.assert_close(score, want[path], atol=1e-4,
                                       rtol=1e-3, msg=f'{name}: {path}')
    assert 'read as a released classifier' in outputs[0]
    assert 'read as a released classifier' not in outputs[1]
    assert all('read as a released classifier' in out
               for out in outputs[3:])


def test_release_without_the_hook_is_refused_by_name(tmp_path):
    """A plain mmengine config without the hook would load nothing from an
    official file; tools/test.py's check reads it as the hook does, and a
    detector given a classifier release is refused with the file named."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules

    import mmvisattn  # noqa: F401
    from mmvisattn.checkpoint import CheckpointError, verify_checkpoint
    swin_files(tmp_path)
    register_all_modules(init_default_scope=False)
    detector = MODELS.build(Config.fromfile(osp.join(
        CONFIGS, 'swin', 'mask-rcnn_swin-t-p4-w7_fpn_ms-crop-1x_coco.py'
    )).model)
    with pytest.raises(CheckpointError, match='swin_official.pth'):
        verify_checkpoint(str(tmp_path / 'swin_official.pth'), detector)
