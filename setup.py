# The nbdev 2 template: all package metadata lives in settings.ini.
from configparser import ConfigParser
import setuptools, shlex

config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

for o in 'version description keywords author author_email license min_python lib_name user git_url'.split():
    assert o in cfg, f'missing expected setting: {o}'

statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
py_versions = '3.10 3.11 3.12 3.13'.split()

requirements = shlex.split(cfg.get('requirements', ''))
dev_requirements = shlex.split(cfg.get('dev_requirements', ''))
min_python = cfg['min_python']

setuptools.setup(
    name=cfg['lib_name'],
    license_expression=cfg['license'],   # an SPDX expression, e.g. Apache-2.0
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])],
                 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title()]
                + ['Programming Language :: Python :: ' + o for o in py_versions[py_versions.index(min_python):]],
    url=cfg['git_url'],
    description=cfg['description'],
    keywords=cfg['keywords'].split(),
    author=cfg['author'],
    author_email=cfg['author_email'],
    packages=setuptools.find_packages(include=['effqwen', 'effqwen.*']),
    include_package_data=True,
    package_data={'effqwen.kernels': ['configs/*.json']},   # the tuned kernel picks per GPU model
    install_requires=requirements,
    extras_require={'dev': dev_requirements},
    dependency_links=cfg.get('dep_links', '').split(),
    python_requires='>=' + cfg['min_python'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={'console_scripts': cfg.get('console_scripts', '').split(),
                  'nbdev': [f'{cfg.get("lib_path")}={cfg.get("lib_path")}._modidx:d']},
    version=cfg['version'],
)
