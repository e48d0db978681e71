"""mmvisattn: modern vision attention backbones for mmdet and mmseg."""
import os
import os.path as osp

from setuptools import find_packages, setup

HERE = osp.dirname(osp.abspath(__file__))


def read_version():
    scope = {}
    with open(osp.join(HERE, 'mmvisattn', 'version.py')) as f:
        exec(f.read(), scope)
    return scope['__version__']


def parse_requirements(fname):
    reqs = []
    with open(osp.join(HERE, 'requirements', fname)) as f:
        for line in f:
            line = line.split('#')[0].strip()
            if line and not line.startswith('-'):
                reqs.append(line)
    return reqs


def mim_files():
    """Configs and the model index ship inside the package (OpenMMLab .mim)."""
    files = []
    for root, dirs, names in os.walk(osp.join(HERE, 'mmvisattn', '.mim'),
                                     followlinks=True):
        dirs[:] = [d for d in dirs if d != '__pycache__']
        for name in names:
            files.append(
                osp.relpath(osp.join(root, name), osp.join(HERE, 'mmvisattn')))
    return files


setup(
    name='mmvisattn',
    version=read_version(),
    description='Swin, TNT and RSWAtt backbones for mmdet and mmsegmentation',
    long_description=open(osp.join(HERE, 'README.md')).read(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=('mmvisattn', 'mmvisattn.*')),
    package_data={'mmvisattn': mim_files()},
    include_package_data=True,
    python_requires='>=3.8',
    install_requires=parse_requirements('runtime.txt'),
    extras_require={'tests': parse_requirements('tests.txt') +
                    parse_requirements('mim.txt'),
                    'deploy': parse_requirements('deploy.txt')},
    license='Apache License 2.0',
    zip_safe=False,
)
