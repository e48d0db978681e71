"""Generate the RSWAtt benchmark: a harder shapes set, deterministically.

The demo set (tools/make_demo_data.py) saturates: three large shapes, one
colour per class, no overlap. This one is built so that a small model at a
CPU budget stays well below saturation and so that the right window size
depends on the object:

* five classes defined by shape: ``square``, ``disc``, ``triangle``,
  ``ring`` (a thin annulus) and ``bar`` (a thin, elongated rectangle, 1/4
  to 1/10 as wide as long). Colour is only a hint: an object takes its
  class's colour with probability ``COLOUR_HINT`` = 0.5 and otherwise any
  colour of the shared palette, and the distractors take the same palette,
  so colour alone cannot solve it (with no hint at all, a small model at a
  CPU budget of 300 iterations learned background and one class only:
  21 mIoU);
* object sizes (the longest side) log-uniform from ``MIN_SIZE`` = 5 to
  ``MAX_SIZE`` = 96 pixels (19.2x) on 128 x 128 images;
* clutter: a noisy, striped or checkered background, and distractors that
  are background (label 0) -- scribbles (random poly-lines) and irregular
  blobs in the objects' colours;
* occlusion: objects may overlap; a later one hides an earlier one, the
  label map and the COCO masks keep only what is visible, and an object
  less than ``MIN_VISIBLE`` visible is dropped from the annotations and
  painted over with background in the label map (it stays in the image).

One set of scenes is written twice, as the demo: COCO instances (visible
masks as polygons, visible boxes) for detection and the ADE20K layout
(label PNGs, 0 = background) for semantic segmentation.

    python dev/make_rswatt_bench.py [data/rswatt_bench] [--num-train 400]
        [--num-val 60] [--size 128 128] [--seed 0]
"""
import argparse
from typing import Dict, List, Tuple

import cv2
import numpy as np

# the demo data's writer (same layout); tools/ is not a package
from mmvisattn.datasets.demo_data import write_scenes

CLASSES = ('square', 'disc', 'triangle', 'ring', 'bar')
# the shared palette (BGR): objects and distractors alike, jittered
COLOURS = ((40, 200, 40), (40, 40, 220), (220, 140, 30), (200, 200, 200),
           (30, 200, 220), (180, 60, 180))
PALETTE = [(0, 0, 0), (40, 200, 40), (220, 40, 40), (30, 140, 220),
           (200, 200, 200), (220, 200, 30)]
MIN_SIZE, MAX_SIZE = 5., 96.
MIN_VISIBLE = 0.4
COLOUR_HINT = 0.5


def _colour(rng: np.random.RandomState, index=None) -> np.ndarray:
    """A palette colour, jittered: ``index``'s, or a random one."""
    if index is None:
        index = rng.randint(len(COLOURS))
    base = np.array(COLOURS[index])
    return np.clip(base + rng.randint(-30, 31, 3), 0, 255)


def _background(rng: np.random.RandomState, h: int, w: int) -> np.ndarray:
    img = np.empty((h, w, 3), np.float32)
    img[:] = rng.randint(20, 110, size=3)
    kind = rng.randint(3)
    yy, xx = np.mgrid[:h, :w]
    if kind == 1:  # stripes at a random angle and period
        a, period = rng.uniform(0, np.pi), rng.uniform(4, 16)
        s = np.sin((xx * np.cos(a) + yy * np.sin(a)) * 2 * np.pi / period)
        img += (s > 0)[..., None] * rng.randint(-40, 41, 3)
    elif kind == 2:  # checkerboard
        c = int(rng.randint(3, 12))
        img += (((yy // c) + (xx // c)) % 2)[..., None] * \
            rng.randint(-40, 41, 3)
    return img + rng.normal(0, 14, img.shape)


def _shape_mask(kind: int, rng: np.random.RandomState, h: int, w: int,
                size: float) -> np.ndarray:
    """The mask of one object of class ``kind`` whose longest side is about
    ``size`` pixels, at a random place and angle (it may leave the image)."""
    mask = np.zeros((h, w), np.uint8)
    cx, cy = rng.uniform(0, w), rng.uniform(0, h)
    r = size / 2
    a = rng.uniform(0, np.pi)
    name = CLASSES[kind]
    if name in ('square', 'triangle'):
        n = 4 if name == 'square' else 3
        # vertices on a circle of diameter ``size``
        t = a + np.arange(n) * 2 * np.pi / n
        pts = np.stack([cx + r * np.cos(t), cy + r * np.sin(t)], 1)
        cv2.fillPoly(mask, [np.round(pts * 8).astype(np.int32)], 1,
                     shift=3)
    elif name == 'disc':
        cv2.circle(mask, (int(round(cx * 8)), int(round(cy * 8))),
                   int(round(r * 8)), 1, -1, shift=3)
    elif name == 'ring':
        thick = max(1, int(round(r * rng.uniform(0.12, 0.3))))
        cv2.circle(mask, (int(round(cx)), int(round(cy))),
                   max(1, int(round(r - thick / 2))), 1, thick)
    else:  # bar
        width = max(1.5, size * rng.uniform(0.1, 0.25))
        d = np.array([np.cos(a), np.sin(a)])
        n = np.array([-d[1], d[0]])
        c = np.array([cx, cy])
        pts = np.stack([c - d * r - n * width / 2, c + d * r - n * width / 2,
                        c + d * r + n * width / 2, c - d * r + n * width / 2])
        cv2.fillPoly(mask, [np.round(pts * 8).astype(np.int32)], 1,
                     shift=3)
    return mask.astype(bool)


def _distractor(rng: np.random.RandomState, img: np.ndarray) -> None:
    h, w = img.shape[:2]
    colour = tuple(int(c) for c in _colour(rng))
    if rng.rand() < 0.5:  # scribble: a random poly-line
        n = rng.randint(3, 7)
        pts = np.cumsum(rng.normal(0, rng.uniform(4, 20), (n, 2)), 0) + \
            [rng.uniform(0, w), rng.uniform(0, h)]
        cv2.polylines(img, [np.round(pts).astype(np.int32)], False, colour,
                      int(rng.randint(1, 3)))
    else:  # blob: a star-shaped polygon with random radii
        n = rng.randint(7, 13)
        t = np.sort(rng.uniform(0, 2 * np.pi, n))
        rad = rng.uniform(2, 14) * rng.uniform(0.4, 1.0, n)
        c = [rng.uniform(0, w), rng.uniform(0, h)]
        pts = np.stack([c[0] + rad * np.cos(t), c[1] + rad * np.sin(t)], 1)
        cv2.fillPoly(img, [np.round(pts).astype(np.int32)], colour)


def _polygons(mask: np.ndarray) -> List[List[float]]:
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL,
                                   cv2.CHAIN_APPROX_SIMPLE)
    polys = []
    for c in contours:
        c = c.reshape(-1, 2).astype(float)
        if len(c) < 3:  # a point or a segment: widen to a triangle
            c = np.concatenate([c, c[-1:] + [0.5, 0.5], c[:1] + [0.5, 0.]])
        polys.append(c.flatten().tolist())
    return polys


def make_scene(rng: np.random.RandomState, size: Tuple[int, int]
               ) -> Tuple[np.ndarray, np.ndarray, List[Dict]]:
    """One image, its semantic label map (0 = background) and its visible
    instances (COCO fields, ``size``: the nominal longest side)."""
    h, w = size
    img = _background(rng, h, w)
    img = np.clip(img, 0, 255).astype(np.uint8)
    for _ in range(rng.randint(4, 10)):
        _distractor(rng, img)
    owner = np.full((h, w), -1, np.int32)  # index of the visible object
    objects = []
    for _ in range(rng.randint(4, 11)):
        kind = rng.randint(len(CLASSES))
        obj_size = float(np.exp(rng.uniform(np.log(MIN_SIZE),
                                            np.log(MAX_SIZE))))
        mask = _shape_mask(kind, rng, h, w, obj_size)
        if mask.sum() < 4:
            continue
        colour = _colour(rng, kind if rng.rand() < COLOUR_HINT else None)
        shade = rng.normal(0, 10, (h, w, 3))
        img[mask] = np.clip(colour + shade[mask], 0, 255).astype(np.uint8)
        owner[mask] = len(objects)
        objects.append((kind, obj_size, int(mask.sum())))
    label = np.zeros((h, w), np.uint8)
    instances = []
    for i, (kind, obj_size, full_area) in enumerate(objects):
        visible = owner == i
        area = int(visible.sum())
        if area == 0 or area < MIN_VISIBLE * full_area:
            continue  # mostly hidden: background in the labels too
        label[visible] = kind + 1
        ys, xs = np.nonzero(visible)
        x0, y0, x1, y1 = xs.min(), ys.min(), xs.max() + 1, ys.max() + 1
        instances.append(
            dict(category_id=kind + 1,
                 bbox=[float(x0), float(y0), float(x1 - x0),
                       float(y1 - y0)],
                 area=float(area),
                 segmentation=_polygons(visible),
                 iscrowd=0,
                 size=round(obj_size, 2)))
    return img, label, instances


def generate(root: str,
             num_train: int = 400,
             num_val: int = 60,
             size: Tuple[int, int] = (128, 128),
             seed: int = 0) -> str:
    """Write the benchmark under ``root`` (idempotent: same arguments, same
    files). Layout as tools/make_demo_data.py::

        root/images/{train,val}/*.png
        root/annotations/instances_{train,val}.json       COCO instances
        root/ade/images/{training,validation}/*.png        same images
        root/ade/annotations/{training,validation}/*.png   labels, 0 = bg
    """
    return write_scenes(root, make_scene, CLASSES, PALETTE, num_train,
                        num_val, size, seed)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('root', nargs='?', default='data/rswatt_bench')
    parser.add_argument('--num-train', type=int, default=400)
    parser.add_argument('--num-val', type=int, default=60)
    parser.add_argument('--size', type=int, nargs=2, default=(128, 128))
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args(argv)
    root = generate(args.root, args.num_train, args.num_val,
                    tuple(args.size), args.seed)
    print(f'RSWAtt benchmark ready in {root}')


if __name__ == '__main__':
    main()
