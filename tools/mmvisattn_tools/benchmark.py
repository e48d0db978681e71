"""The pair the backbone benchmarks time: our Swin and mmdet's, with the same
weights."""
from mmvisattn.models.backbones import SwinTransformer
from mmvisattn.models.utils import swin_to_mmdet


def build_pair(arch):
    """Ours (``arch``, no stochastic depth, initialised) and mmdet's Swin
    holding the same weights."""
    from mmdet.models.backbones import SwinTransformer as MMDetSwin
    zoo = SwinTransformer.arch_zoo[arch]
    ours = SwinTransformer(arch=arch, drop_path_rate=0.)
    ours.init_weights()
    theirs = MMDetSwin(embed_dims=zoo['embed_dims'], depths=zoo['depths'],
                       num_heads=zoo['num_heads'], drop_path_rate=0.)
    theirs.load_state_dict(swin_to_mmdet(ours.state_dict()), strict=False)
    return ours, theirs
