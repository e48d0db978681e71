"""Generate the project's demo dataset: coloured shapes, deterministically.

One set of scenes is written twice: as COCO instances (polygons) for
detection and in the ADE20K layout (label PNGs, 0 = background/void) for
semantic segmentation. Small, quick to learn, and the same on every machine.

    python tools/make_demo_data.py [data/shapes] [--num-train 240] [--num-val 40]
"""
import argparse

from mmvisattn.datasets.demo_data import generate_shapes

__all__ = ['generate_shapes']


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('root', nargs='?', default='data/shapes')
    parser.add_argument('--num-train', type=int, default=240)
    parser.add_argument('--num-val', type=int, default=40)
    parser.add_argument('--size', type=int, nargs=2, default=(160, 160))
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args()
    root = generate_shapes(args.root, args.num_train, args.num_val,
                           tuple(args.size), args.seed)
    print(f'demo data ready in {root}')


if __name__ == '__main__':
    main()
