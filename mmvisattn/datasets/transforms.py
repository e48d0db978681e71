"""InstaBoost that works with today's numpy.

instaboostfast 0.1.2 (its only release, unmaintained) builds polygons with
``np.subtract(contours, 1)`` on a list of contours of different lengths,
which numpy >= 1.24 refuses ("inhomogeneous shape"): about half of COCO's
images then crash the data loader. ``mmvisattn.InstaBoost`` is mmdet's
transform with that one function replaced by a per-contour version, so a
plain ``pip install instaboostfast`` is enough.

Use ``custom_imports=dict(imports=['mmvisattn', 'mmvisattn.datasets.transforms'])``
and ``dict(type='mmvisattn.InstaBoost', ...)`` in a pipeline.
"""
from mmdet.datasets.transforms import InstaBoost as MMDetInstaBoost
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
from mmengine.registry import Registry

from mmvisattn.setup_env import patch_instaboostfast

TRANSFORMS = Registry(
    'transform',
    parent=MMENGINE_TRANSFORMS,
    scope='mmvisattn',
    locations=['mmvisattn.datasets.transforms'])


@TRANSFORMS.register_module()
class InstaBoost(MMDetInstaBoost):
    """mmdet's ``InstaBoost`` on a numpy-compatible instaboostfast."""

    def __init__(self, *args, **kwargs):
        try:
            patch_instaboostfast()
        except ImportError as e:
            raise ImportError(
                'mmvisattn.InstaBoost needs instaboostfast: pip install '
                'instaboostfast (requirements/htcpp.txt)') from e
        super().__init__(*args, **kwargs)
