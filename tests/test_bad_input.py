"""Bad input: each case is either handled (and the handling is the asserted,
documented behaviour) or refused with an error naming the file, key or
shape. docs/bad_input.md lists the same table."""
import json
import os.path as osp
import shutil
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import mmvisattn  # noqa: F401
from helpers import REPO, default_scope_guard, generate_shapes
from helpers.seg_config import small_seg_config, tool_env
from mmvisattn.datasets.checks import check_dataloader_files
from mmvisattn.registry import MODELS

DET_DEMO = osp.join(REPO, 'configs', 'demo',
                    'cascade-mask-rcnn_swin-t_shapes.py')
SEG_DEMO = osp.join(REPO, 'configs', 'demo', 'upernet_swin-t_shapes-ade.py')

# Small members of each family: the checks are about shapes, not capacity.
BACKBONES = {
    'swin': dict(type='SwinTransformer', embed_dims=16, depths=(1, 1, 1, 1),
                 num_heads=(1, 1, 2, 2)),
    'swinv2': dict(type='SwinTransformerV2', embed_dims=16,
                   depths=(1, 1, 1, 1), num_heads=(1, 1, 2, 2)),
    'tnt': dict(type='TNT', arch=dict(inner_dims=8, outer_dims=32,
                                      depth=4, inner_heads=1,
                                      outer_heads=2)),
    'rswatt': dict(type='RSWAttTransformer', arch='nano'),
}


@pytest.fixture(scope='module')
def backbones():
    torch.manual_seed(0)
    return {k: MODELS.build(v).eval() for k, v in BACKBONES.items()}


@settings(max_examples=12, deadline=None, derandomize=True)
@given(h=st.integers(1, 70), w=st.integers(1, 70),
       name=st.sampled_from(sorted(BACKBONES)))
def test_any_image_size_gives_the_pyramid(backbones, h, w, name):
    """Odd sizes, 1x1 and maps smaller than a window: padded, never
    refused; stride-s outputs have ceil(size / s) cells (the pyramid mmdet's
    FPN and mmseg's UperNet expect)."""
    with torch.no_grad():
        outs = backbones[name](torch.rand(1, 3, h, w))
    assert len(outs) == 4
    for out, stride in zip(outs, (4, 8, 16, 32)):
        assert out.shape[-2:] == (-(-h // stride), -(-w // stride)), \
            (name, h, w, stride, out.shape)
        assert torch.isfinite(out).all()


@pytest.mark.parametrize('name', sorted(BACKBONES))
@pytest.mark.parametrize('shape', [(1, 1, 32, 32), (1, 4, 32, 32),
                                   (3, 32, 32)])
def test_wrong_channels_or_rank_named(backbones, name, shape):
    with pytest.raises(ValueError, match=r'\(N, 3, H, W\).*got ' +
                       re_shape(shape)):
        backbones[name](torch.rand(*shape))


def re_shape(shape):
    return r'\(' + r', '.join(map(str, shape)) + r'\)'


@pytest.mark.parametrize('name', sorted(BACKBONES))
@pytest.mark.parametrize('bad', [float('nan'), float('inf')])
def test_nan_or_inf_pixels_refused_in_anomaly_mode(backbones, name, bad):
    """In the forward, the value check runs only under PyTorch's debug
    switch (``detect_anomaly``); by default the forward reads no tensor
    values (a GPU sync per forward), which the next test pins."""
    x = torch.rand(1, 3, 32, 32)
    x[0, 1, 5, 7] = bad
    with torch.autograd.detect_anomaly(check_nan=False):
        with pytest.raises(ValueError, match='NaN/Inf pixel values'):
            backbones[name](x)


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_forward_reads_no_tensor_values(backbones, name, monkeypatch):
    """No ``isfinite`` check (or any other read of a tensor's values into
    Python) in the default forward: on a GPU each would stall the stream.
    ``Tensor.__bool__``/``item`` are counted while the backbone runs."""
    reads = []
    for attr in ('__bool__', 'item'):
        original = getattr(torch.Tensor, attr)

        def counting(self, *a, _original=original, _attr=attr, **k):
            reads.append(_attr)
            return _original(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, attr, counting)
    x = torch.rand(1, 3, 32, 32)
    x[0, 1, 5, 7] = float('nan')
    with torch.no_grad():
        backbones[name](x)  # NaN in, NaN out: caught by the hooks below
    monkeypatch.undo()
    assert reads == [], (name, reads)


def test_finite_input_hook_names_the_batch_and_a_zero_std():
    """The check moved out of the forward: ``FiniteInputHook`` reads each
    batch on the host before the preprocessor moves it, and refuses a
    data preprocessor whose std would divide by zero."""
    import types

    from mmvisattn.engine import FiniteInputHook
    hook = FiniteInputHook()
    good = dict(inputs=[torch.zeros(3, 8, 8, dtype=torch.uint8),
                        torch.rand(3, 8, 8)])
    hook.before_train_iter(None, 0, good)
    hook.before_test_iter(None, 0, dict(inputs=torch.rand(2, 3, 8, 8)))
    bad = torch.rand(3, 8, 8)
    bad[1, 2, 3] = float('inf')
    with pytest.raises(ValueError,
                       match=r'val batch 5, image 1 \(shape \(3, 8, 8\)\) '
                       'has NaN/Inf'):
        hook.before_val_iter(None, 5, dict(inputs=[good['inputs'][0], bad]))
    model = MODELS.build(dict(
        type='mmdet.DetDataPreprocessor', mean=[0., 0., 0.],
        std=[1., 0., 1.]))
    runner = types.SimpleNamespace(
        model=types.SimpleNamespace(data_preprocessor=model))
    with pytest.raises(ValueError, match='data_preprocessor.std has a zero'):
        hook.before_run(runner)


# ---------------------------------------------------------------- files


@pytest.fixture(scope='module')
def shapes(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('bad'))
    generate_shapes(root, num_train=6, num_val=2, size=(64, 64))
    return root


def det_cfg(root, ann='annotations/instances_train.json', img='images/train/'):
    from mmengine.config import Config
    cfg = Config.fromfile(DET_DEMO)
    cfg.train_dataloader.dataset.update(data_root=root + '/', ann_file=ann,
                                        data_prefix=dict(img=img))
    return cfg


def build_dataset(cfg):
    from mmdet.registry import DATASETS
    from mmdet.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    return DATASETS.build(cfg.train_dataloader.dataset)


def rewrite_ann(root, name, edit):
    with open(osp.join(root, 'annotations', 'instances_train.json')) as f:
        data = json.load(f)
    edit(data)
    with open(osp.join(root, 'annotations', name), 'w') as f:
        json.dump(data, f)
    return f'annotations/{name}'


def test_grayscale_and_rgba_files_load_as_rgb_images(shapes, tmp_path):
    """mmcv's LoadImageFromFile decodes with color_type='color': grayscale
    is replicated to 3 channels, RGBA loses its alpha (pixels kept)."""
    from mmcv.transforms import LoadImageFromFile
    src = cv2.imread(osp.join(shapes, 'images', 'train', 'train_00000.png'))
    gray = cv2.cvtColor(src, cv2.COLOR_BGR2GRAY)
    rgba = cv2.cvtColor(src, cv2.COLOR_BGR2BGRA)
    rgba[..., 3] = 7  # nearly transparent: ignored
    cv2.imwrite(str(tmp_path / 'gray.png'), gray)
    cv2.imwrite(str(tmp_path / 'rgba.png'), rgba)
    load = LoadImageFromFile()
    g = load(dict(img_path=str(tmp_path / 'gray.png')))['img']
    a = load(dict(img_path=str(tmp_path / 'rgba.png')))['img']
    assert g.shape == a.shape == src.shape
    assert (g == gray[..., None]).all()
    assert (a == src).all()


@pytest.fixture(scope='module')
def segmentor():
    from mmseg.apis import init_model
    with default_scope_guard():
        model = init_model(SEG_DEMO, device='cpu')
    return model.eval()


@pytest.mark.parametrize('size,mode', [((1, 1), 'color'), ((37, 53), 'gray'),
                                       ((5, 90), 'rgba')])
def test_segmentor_predicts_every_pixel_of_odd_images(segmentor, tmp_path,
                                                      size, mode):
    """Through mmseg's inference API with the demo config: 1x1, odd sizes,
    grayscale and RGBA files give a label for every input pixel."""
    from mmengine.registry import init_default_scope
    from mmseg.apis import inference_model
    init_default_scope('mmseg')  # the inference pipeline's registry
    img = (np.random.RandomState(0).rand(*size, 3) * 255).astype(np.uint8)
    if mode == 'gray':
        img = img[..., 0]
    elif mode == 'rgba':
        img = np.dstack([img, np.full(size, 255, np.uint8)])
    path = str(tmp_path / 'odd.png')
    cv2.imwrite(path, img)
    result = inference_model(segmentor, path)
    assert tuple(result.pred_sem_seg.data.shape[-2:]) == size


def test_truncated_jpeg_in_a_dataset_names_the_file(shapes, tmp_path):
    """This OpenCV refuses a JPEG cut short; mmcv's loader then stops with
    the file's path (training stops there; `ignore_empty=True` on
    LoadImageFromFile would skip such files instead)."""
    root = str(tmp_path / 'data')
    shutil.copytree(shapes, root)
    folder = osp.join(root, 'images', 'train')
    blob = cv2.imencode('.jpg', cv2.imread(osp.join(folder,
                                                    'train_00001.png')))[1]
    bad = osp.join(folder, 'train_00001.png')  # the json's name, JPEG bytes
    with open(bad, 'wb') as f:
        f.write(blob.tobytes()[:len(blob) * 2 // 3])
    dataset = build_dataset(det_cfg(root))
    index = [i for i in range(len(dataset))
             if dataset.get_data_info(i)['img_path'] == bad]
    assert index, 'the truncated image was filtered out'
    with pytest.raises(AssertionError, match='failed to load image: ' + bad):
        dataset[index[0]]


def test_annotation_listing_a_missing_image(shapes, tmp_path):
    def drop_image(data):
        data['images'][0]['file_name'] = 'no_such_image.png'

    ann = rewrite_ann(shapes, 'missing_image.json', drop_image)
    with pytest.raises(FileNotFoundError,
                       match=r'missing_image\.json .* no_such_image\.png'):
        check_dataloader_files(det_cfg(shapes, ann), 'train_dataloader',
                               training=True)


def test_images_without_annotations_are_filtered_and_all_empty_refused(
        shapes):
    def empty_some(data):
        keep = {im['id'] for im in data['images'][:4]}
        data['annotations'] = [
            a for a in data['annotations'] if a['image_id'] in keep
        ]

    ann = rewrite_ann(shapes, 'some_empty.json', empty_some)
    cfg = det_cfg(shapes, ann)
    check_dataloader_files(cfg, 'train_dataloader', training=True)
    # mmdet's filter_empty_gt drops the 2 unannotated images from training
    assert len(build_dataset(cfg)) == 4

    ann = rewrite_ann(shapes, 'all_empty.json',
                      lambda data: data.update(annotations=[]))
    with pytest.raises(ValueError, match=r'all_empty\.json.*none of its 6 '
                       r'images has a \(non-crowd\) annotation'):
        check_dataloader_files(det_cfg(shapes, ann), 'train_dataloader',
                               training=True)


def test_boxes_outside_the_image(shapes):
    """mmdet keeps a box that overlaps the image (Resize then clips it to
    the border) and drops one entirely outside or of size < 1."""
    def move_boxes(data):
        first = data['images'][0]['id']
        anns = [a for a in data['annotations'] if a['image_id'] == first]
        anns[0]['bbox'] = [50.0, 40.0, 40.0, 40.0]  # past the 64px border
        extra = dict(anns[0], id=10**6, bbox=[100.0, 100.0, 10.0, 10.0])
        tiny = dict(anns[0], id=10**6 + 1, bbox=[3.0, 3.0, 0.5, 10.0])
        data['annotations'] += [extra, tiny]

    ann = rewrite_ann(shapes, 'outside.json', move_boxes)
    cfg = det_cfg(shapes, ann)
    dataset = build_dataset(cfg)
    with open(osp.join(shapes, ann)) as f:
        data = json.load(f)
    first = data['images'][0]['id']
    n_json = sum(a['image_id'] == first for a in data['annotations'])
    index = [i for i in range(len(dataset))
             if dataset.get_data_info(i)['img_id'] == first][0]
    info = dataset.get_data_info(index)
    assert len(info['instances']) == n_json - 2
    packed = dataset[index]
    boxes = packed['data_samples'].gt_instances.bboxes.tensor
    h, w = packed['data_samples'].img_shape
    assert (boxes[:, 2] <= w).all() and (boxes[:, 3] <= h).all()
    assert (boxes[:, 0] >= 0).all() and (boxes[:, 1] >= 0).all()


@pytest.mark.slow
def test_non_finite_loss_stops_training_before_a_checkpoint(shapes, tmp_path):
    """An absurd learning rate: the run stops at the first NaN/Inf loss with
    the iteration and the last complete checkpoint named; no checkpoint of
    the broken weights is written."""
    config = small_seg_config(str(tmp_path), shapes + '/ade/', 2,
                              max_iters=6, probe=False, interval=1,
                              max_keep=1)
    work = str(tmp_path / 'work')
    proc = subprocess.run(
        [sys.executable, 'tools/train.py', config, '--work-dir', work,
         '--cfg-options', 'optim_wrapper.optimizer.lr=1e30'],
        cwd=REPO, env=tool_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode != 0
    message = [line for line in proc.stdout.splitlines()
               if line.startswith('FloatingPointError')]
    assert message, proc.stdout[-3000:]
    first_bad = int(message[0].split('iteration ')[1].split(':')[0])
    assert 'non-finite loss' in message[0]
    with open(osp.join(work, 'last_checkpoint')) as f:
        last = f.read()
    assert last.endswith(f'iter_{first_bad - 1}.pth'), (last, message)
    assert not osp.exists(osp.join(work, f'iter_{first_bad}.pth'))


@pytest.mark.parametrize('override,named', [
    ('model.backbone.window_szie=7', "unexpected keyword argument "
     "'window_szie'"),
    ('model.backbone.type=mmvisattn.SwinTransformr', 'SwinTransformr is not '
     'in the'),
    ('model.backbone.arch=tinny', "'tinny'"),
])
@pytest.mark.slow
def test_misspelt_backbone_keys_are_named(shapes, tmp_path, override, named):
    proc = subprocess.run(
        [sys.executable, 'tools/train.py', SEG_DEMO, '--work-dir',
         str(tmp_path), '--cfg-options',
         f'train_dataloader.dataset.data_root={shapes}/ade/', override],
        cwd=REPO, env=tool_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert named in proc.stderr.strip().splitlines()[-1], proc.stderr[-2000:]
