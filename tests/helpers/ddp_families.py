"""Run under ``torchrun --nproc_per_node 2``: every backbone family trains
2 iterations of a real mmseg UperNet (the demo config, narrowed) under
mmengine's DDP with its default ``find_unused_parameters=False``, where a
parameter that no output uses fails at the second iteration.

    torchrun --nproc_per_node 2 tests/helpers/ddp_families.py DATA_ROOT OUT
"""
import copy
import os.path as osp
import sys

import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.runner import Runner

import mmvisattn  # noqa: F401
from mmvisattn.registry import MODEL_WRAPPERS

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SEG_DEMO = osp.join(REPO, 'configs', 'demo', 'upernet_swin-t_shapes-ade.py')
SWIN = dict(type='mmvisattn.SwinTransformer', embed_dims=16,
            depths=(2, 2, 2, 2), num_heads=(1, 2, 4, 8), window_size=4)
FAMILIES = {
    'swin': SWIN,
    # the HTC++ configs' switch: one global-attention block after stage 4
    'swin-global-block': dict(SWIN, extra_global_block=True),
    'swinv2': dict(SWIN, type='mmvisattn.SwinTransformerV2'),
    'tnt-pyramid': dict(type='mmvisattn.TNT', img_size=64,
                        arch=dict(inner_dims=8, outer_dims=32, depth=2,
                                  inner_heads=1, outer_heads=2)),
    'rswatt': dict(type='mmvisattn.RSWAttTransformer', arch='nano'),
    # the RSWAtt plug-in in a ResNet's bottlenecks, as the rswatt configs
    'resnet-rswatt-plugin': dict(
        type='ResNetV1c', depth=50, base_channels=16, stem_channels=16,
        plugins=[dict(cfg=dict(type='mmvisattn.RSWAttPlugin',
                               scale_windows=(5, 9)),
                      stages=(False, True, True, True),
                      position='after_conv2')]),
}


def segmentor(backbone: dict, data_root: str):
    from mmseg.registry import MODELS
    cfg = Config.fromfile(SEG_DEMO)
    probe = MODELS.build(copy.deepcopy(backbone))
    with torch.no_grad():
        outs = probe(torch.rand(1, 3, 64, 64))
    channels = [o.shape[1] for o in outs]
    cfg.model.backbone = backbone
    cfg.model.data_preprocessor.size = (64, 64)
    cfg.model.decode_head.update(in_channels=channels, channels=16,
                                 dropout_ratio=0.0)
    cfg.model.auxiliary_head.update(in_channels=channels[2], channels=8,
                                    dropout_ratio=0.0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    loader = copy.deepcopy(cfg.train_dataloader)
    loader.batch_size = 2
    loader.dataset.data_root = data_root
    loader.dataset.pipeline = [
        dict(type='LoadImageFromFile'),
        dict(type='LoadAnnotations', reduce_zero_label=True),
        dict(type='Resize', scale=(64, 64), keep_ratio=False),
        dict(type='PackSegInputs')]
    return model, Runner.build_dataloader(loader, seed=0)


def main(data_root: str, out: str):
    dist.init_process_group('gloo')
    init_default_scope('mmseg')
    rank = dist.get_rank()
    for name, backbone in FAMILIES.items():
        torch.manual_seed(0)
        model, loader = segmentor(backbone, data_root)
        ddp = MODEL_WRAPPERS.build(dict(
            type='mmvisattn.CPUDistributedDataParallel', module=model,
            broadcast_buffers=False, find_unused_parameters=False))
        optim = build_optim_wrapper(ddp, dict(
            type='OptimWrapper', optimizer=dict(type='SGD', lr=0.01)))
        batches = iter(loader)
        losses = []
        for _ in range(2):  # an unused parameter fails the second
            logs = ddp.train_step(next(batches), optim)
            losses.append(float(logs['loss']))
        first = next(p for p in ddp.module.backbone.parameters())
        copies = [torch.empty_like(first) for _ in range(2)]
        dist.all_gather(copies, first.detach())
        with open(osp.join(out, f'{name}.rank{rank}.txt'), 'w') as f:
            f.write(f'{losses} {float((copies[0] - copies[1]).abs().max())}')
    dist.destroy_process_group()


if __name__ == '__main__':
    main(*sys.argv[1:3])
